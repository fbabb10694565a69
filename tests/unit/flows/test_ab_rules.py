"""The rules of gate ab that need no server: when it stops, the budget, whose error a broken
measurement is, and the pairs gate calibrate stores."""

from __future__ import annotations

import pytest
from support.factories import cell, gpu_plan, make_results

from gate.core.errors import GateError, MeasurementError
from gate.flows import ab, blocks, sides
from gate.flows.calibrate import aa_pairs
from gate.judge.verdict import Outcome, Verdict
from gate.measure.measured_build import cells_for_repeat
from gate.plan.spec import Plan, load_plan
from gate.plan.thresholds import Thresholds


@pytest.mark.parametrize(("outcome", "stop"), [
    (Outcome.PASS, True), (Outcome.FAIL, True), (Outcome.ERROR, True),
    (Outcome.INCONCLUSIVE, False)])
def test_an_ab_stops_once_the_verdict_is_decided(outcome, stop):
    assert ab.decided(Verdict(outcome=outcome, headline="x", mode="ab")) is stop


def test_a_block_that_would_not_fit_the_budget_is_not_started():
    assert ab.fits_budget(elapsed_s=500.0, block_s=200.0, budget_minutes=12)
    assert not ab.fits_budget(elapsed_s=500.0, block_s=200.0, budget_minutes=11)
    assert ab.fits_budget(elapsed_s=1e9, block_s=200.0, budget_minutes=None)
    assert ab.fits_budget(elapsed_s=1e9, block_s=None, budget_minutes=1)


def test_every_cell_changes_build_order_from_round_to_round():
    """ABBA per cell: whichever build goes first in a cell goes second in the same cell of the
    next round, wherever the interleaved sweep puts the cell in the round (before, the sweep's
    arm flip and the build flip cancelled: guided c=4 was the head's first in every round)."""
    plan = load_plan("cpu-smoke")
    plan = plan.model_copy(update={"ab": plan.ab.model_copy(update={"cells": "all"})})
    order = blocks.cell_order(cells_for_repeat(plan, 0))
    first = {}
    for r in range(4):
        for cell_ in cells_for_repeat(plan, r):
            key = (cell_.key.phase, cell_.key.arm, cell_.key.concurrency)
            first.setdefault(key, []).append((r + order[key]) % 2 == 0)
    assert all(seq == [seq[0], not seq[0]] * 2 for seq in first.values())


def test_split_cpus_swap_halves_between_builds_and_blocks():
    assert blocks.split_cpus("base", 0, cpus={0, 1}) == (0,)
    assert blocks.split_cpus("head", 0, cpus={0, 1}) == (1,)
    assert blocks.split_cpus("base", 1, cpus={0, 1}) == (1,)
    assert blocks.split_cpus("head", 2, cpus={0, 1, 2, 3}) == (2, 3)
    with pytest.raises(GateError, match="at least 2 CPUs"):
        blocks.split_cpus("base", 0, cpus={0})


def test_a_side_error_carries_its_side_as_data():
    cause = MeasurementError("warm-up requests failed, not measuring")  # names no side
    err = sides.SideError("head", cause)
    assert err.side == "head" and str(err) == str(cause)
    assert err.exit_code == cause.exit_code


def test_calibration_pairs_each_round_of_every_check():
    plan = gpu_plan(levels=(8,), repeats=2)

    def side(factor: float):
        cells = []
        for r in range(2):
            cells += [cell("drain", "guided", 64, r, rpm=200.0 * factor),
                      cell("sweep", "guided", 8, r, tpot_p50=20.0 * factor),
                      cell("sweep", "free", 8, r, tpot_p50=10.0)]
        return make_results(cells, plan=plan)

    pairs, units = aa_pairs(side(1.0), side(1.1), plan=plan)
    assert [(p.round, p.base, p.head) for p in pairs["drain.req_per_min"]] == \
        [(r, 200.0, pytest.approx(220.0)) for r in range(2)]
    assert [(p.base, p.head) for p in pairs["sweep.c8.tpot_p50_ms"]] == [(20.0, pytest.approx(22.0))] * 2
    assert [(p.base, p.head) for p in pairs["ratio.c8.tpot_p50"]] == [(2.0, pytest.approx(2.2))] * 2
    assert {"sweep.c8.tpot_p99_ms", "sweep.c8.itl_p99_ms"} <= set(pairs)  # judged or not
    assert units["ratio.c8.tpot_p50"] == "x"


def _cells(plan: Plan, r: int, thresholds: Thresholds | None = None) -> list[tuple]:
    return [(c.key.phase, c.key.arm, c.key.concurrency, c.also.label if c.also else None)
            for c in blocks.round_cells(plan, thresholds or plan.thresholds, r)]


def test_judged_cells_measure_what_the_checks_read_and_the_drain_window_once():
    """cpu-smoke judges the drain, guided TPOT p50 at 4 and 8 and guided/free at 8: the free
    c=4 cell is read by no check, and the sweep's guided c=8 cell is the drain's condition."""
    plan = load_plan("cpu-smoke")
    assert plan.ab.cells == "judged"
    assert _cells(plan, 1) == [("drain", "guided", 8, "sweep guided c=8 r2"),
                               ("sweep", "guided", 4, None), ("sweep", "free", 8, None)]
    every = plan.model_copy(update={"ab": plan.ab.model_copy(update={"cells": "all"})})
    assert len(_cells(every, 1)) == 5


def test_a_judged_check_on_the_free_c4_cell_brings_it_back():
    plan = load_plan("cpu-smoke")
    wait_at_4 = plan.thresholds.model_copy(update={"ttft_wait_min_concurrency": 4})
    assert ("sweep", "free", 4, None) in _cells(plan, 0, wait_at_4)


def test_the_drain_stands_for_the_sweep_cell_only_when_both_are_judged_and_windows_alike():
    plan = load_plan("cpu-smoke")
    no_drain = plan.thresholds.model_copy(update={"drain_throughput_pct": None})
    assert ("sweep", "guided", 8, None) in _cells(plan, 0, no_drain)
    assert not any(c[0] == "drain" for c in _cells(plan, 0, no_drain))
    longer = plan.model_copy(update={"drain": plan.drain.model_copy(update={"window_s": 9})})
    assert _cells(longer, 0)[0] == ("drain", "guided", 8, None)
    assert ("sweep", "guided", 8, None) in _cells(longer, 0)
    few = plan.model_copy(update={"drain": plan.drain.model_copy(update={"requests": 8})})
    assert ("sweep", "guided", 8, None) in _cells(few, 0)


def test_judged_rounds_keep_abba_per_cell():
    plan = load_plan("cpu-smoke")
    order = blocks.cell_order(blocks.round_cells(plan, plan.thresholds, 0))
    first = {}
    for r in range(4):
        for cell_ in blocks.round_cells(plan, plan.thresholds, r):
            key = (cell_.key.phase, cell_.key.arm, cell_.key.concurrency)
            first.setdefault(key, []).append((r + order[key]) % 2 == 0)
    assert len(first) == 3
    assert all(seq == [seq[0], not seq[0]] * 2 for seq in first.values())
