"""The rules of gate ab that need no server: when it stops, the budget, whose error a broken
measurement is, and the pairs gate calibrate stores."""

from __future__ import annotations

import pytest
from support.factories import cell, gpu_plan, make_results

from gate.core.errors import MeasurementError
from gate.flows import ab
from gate.flows.calibrate import aa_pairs
from gate.judge.verdict import Outcome, Verdict


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


@pytest.mark.parametrize(("more_blocks", "blocks"), [(None, 10), (3, 3)])
def test_a_screened_block_prices_the_calibration_it_asks_for(more_blocks, blocks):
    verdict = Verdict(outcome=Outcome.INCONCLUSIVE, headline="x", mode="ab",
                      runner_seconds={"wall": 266.0})
    why = ab.Uncalibrated("no calibration of this runner", more_blocks)
    text = ab.screened_message(verdict, why)
    assert text.startswith("screened one block: no gross slowdown")
    assert f"This block took 266 s, so {blocks} calibration blocks take about " \
           f"{round(blocks * 266 / 60)} runner minutes here" in text


def test_a_side_error_carries_its_side_as_data():
    cause = MeasurementError("warm-up requests failed, not measuring")  # names no side
    err = ab.SideError("head", cause)
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

    pairs, units = aa_pairs(side(1.0), side(1.1), plan)
    assert pairs["drain.req_per_min"] == [(200.0, pytest.approx(220.0))] * 2
    assert pairs["sweep.c8.tpot_p50_ms"] == [(20.0, pytest.approx(22.0))] * 2
    assert pairs["ratio.c8.tpot_p50"] == [(2.0, pytest.approx(2.2))] * 2
    assert {"sweep.c8.tpot_p99_ms", "sweep.c8.itl_p99_ms"} <= set(pairs)  # judged or not
    assert units["ratio.c8.tpot_p50"] == "x"
