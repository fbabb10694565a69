"""Time to first token judged: TTFT p50/p90 per guided arm (shared schemas: the grammar cache
hits; unique schemas: it misses) and level, the wait a schema adds over free requests, and a
TTFT failure leading the headline."""

from __future__ import annotations

from support.calibrations import noise_for_results
from support.factories import cell, gpu_plan, make_results

from gate.judge.checks import judged, per_repeat, slots
from gate.judge.compare import ABReference, compare_results
from gate.judge.noise import Noise
from gate.judge.verdict import Outcome
from gate.plan.spec import SweepSpec
from gate.plan.thresholds import Thresholds

T = Thresholds()
PLAN = gpu_plan(levels=(4,), repeats=3).model_copy(
    update={"sweep": SweepSpec(levels=[4], arms=["guided", "free", "unique"])})


def rounds(unique_ttft: list[float], guided_ttft: float = 50.0, tpot: float = 10.0, label="head"):
    """Rounds of a sweep at c=4 with all three arms; free TTFT is 40 ms."""
    cells = []
    for r, u in enumerate(unique_ttft):
        cells += [cell("sweep", "guided", 4, r, ttft_p50=guided_ttft, tpot_p50=tpot),
                  cell("sweep", "free", 4, r, ttft_p50=40.0, tpot_p50=10.0),
                  cell("sweep", "unique", 4, r, ttft_p50=u, ttft_p90=u * 1.5, tpot_p50=10.0)]
    res = make_results(cells, plan=PLAN.model_copy(update={"repeats": len(unique_ttft)}),
                       label=label)
    return res.model_copy(update={"sequential_rounds": 6, "plan_hash": PLAN.measurement_hash()})


def noise(sigma: float = 0.05) -> Noise:
    """A calibration of every check of these rounds: `sigma` between rounds and between
    server pairs alike."""
    names = [s.name for s in slots(rounds([100.0]))] + ["ratio.c4.tpot_p50"]
    return noise_for_results(rounds([100.0]), names=names, between=sigma, within=sigma)


def test_slots_cover_each_guided_arm_and_the_wait_over_free():
    found = {s.name: s for s in slots(rounds([100.0]))}
    assert {"sweep.c4.ttft_p50_ms", "sweep.c4.ttft_p90_ms", "unique.c4.ttft_p50_ms",
            "unique.c4.ttft_p90_ms", "ratio.c4.ttft_p50", "ratio.c4.unique_ttft_p50"} <= set(found)
    assert found["unique.c4.ttft_p50_ms"].label == "TTFT p50 (unique schemas, c=4)"
    assert found["unique.c4.ttft_p50_ms"].arm == "unique"
    res = rounds([100.0, 120.0])
    assert per_repeat(res, found["unique.c4.ttft_p90_ms"]) == {0: 150.0, 1: 180.0}
    assert per_repeat(res, found["ratio.c4.unique_ttft_p50"]) == {0: 2.5, 1: 3.0}
    assert per_repeat(res, found["ratio.c4.ttft_p50"]) == {0: 1.25, 1: 1.25}


def test_a_null_threshold_switches_a_ttft_check_off():
    off = Thresholds(ttft_tail_pct=None, ttft_wait_pct=None)
    names = {s.name for s in judged(slots(rounds([100.0])), off)}
    assert "unique.c4.ttft_p50_ms" in names and "unique.c4.ttft_p90_ms" not in names
    assert not any(n.startswith("ratio.c4.") and "ttft" in n for n in names)


def test_a_slower_compile_fails_on_the_cache_miss_arm_and_leads_the_headline():
    base, head = rounds([100.0, 102.0, 98.0], label="base"), rounds([500.0, 510.0, 490.0])
    v = compare_results(head, ABReference(base), T, noise=noise())
    failed = {c.name for c in v.checks if c.outcome == Outcome.FAIL}
    assert {"unique.c4.ttft_p50_ms", "unique.c4.ttft_p90_ms", "ratio.c4.unique_ttft_p50"} <= failed
    assert "sweep.c4.ttft_p50_ms" not in failed and "sweep.c4.tpot_p50_ms" not in failed
    assert v.headline.startswith("FAIL: time to first token: ")
    unique = next(c for c in v.checks if c.name == "unique.c4.ttft_p50_ms")
    assert unique.arm == "unique" and unique.decided_at_round == 2  # the first block
    assert any("grammar" in a for a in v.advice)


def test_a_ttft_failure_leads_the_headline_over_a_per_token_one():
    base = rounds([100.0] * 3, tpot=10.0, label="base")
    head = rounds([400.0] * 3, tpot=20.0)
    v = compare_results(head, ABReference(base), T, noise=noise())
    assert check_failed(v, "sweep.c4.tpot_p50_ms") and check_failed(v, "unique.c4.ttft_p50_ms")
    assert v.headline.startswith("FAIL: time to first token: TTFT")


def test_a_slower_step_leads_with_the_per_step_check_when_ttft_moved_with_it():
    """The seed's class of regression: every guided step slower. The first token is a step
    too, so TTFT moves by about as much as TPOT; the headline and the advice must point at the
    step, not at grammar compilation."""
    base = rounds([100.0] * 3, guided_ttft=50.0, tpot=10.0, label="base")
    head = rounds([100.0] * 3, guided_ttft=110.0, tpot=21.0)
    v = compare_results(head, ABReference(base), T, noise=noise())
    assert check_failed(v, "sweep.c4.tpot_p50_ms") and check_failed(v, "sweep.c4.ttft_p50_ms")
    assert v.headline.startswith("FAIL: TPOT"), v.headline
    assert not any("grammar compilation" in a for a in v.advice)
    assert any("moved with the per-step cost" in a for a in v.advice)


def test_equal_builds_pass_the_ttft_checks():
    base = rounds([100.0, 101.0, 99.0, 100.5], label="base")
    head = rounds([100.0, 99.0, 101.0, 99.5])  # two blocks: the first look
    v = compare_results(head, ABReference(base), T, noise=noise(0.02))
    ttft = [c for c in v.checks if "ttft" in c.name]
    assert len([c for c in ttft if not c.name.startswith("spread.")]) == 6
    assert all(c.outcome == Outcome.PASS for c in ttft)


def check_failed(v, name: str) -> bool:
    return next(c for c in v.checks if c.name == name).outcome == Outcome.FAIL


def test_invalid_outputs_of_the_unique_arm_make_the_run_an_error():
    head = rounds([100.0])
    broken = [c.model_copy(update={"valid_outputs": c.completed - 3, "invalid_outputs": 3})
              if c.arm == "unique" else c for c in head.cells]
    v = compare_results(head.model_copy(update={"cells": broken}),
                        ABReference(rounds([100.0], label="base")), T, noise=noise())
    assert v.outcome == Outcome.ERROR and "3 of" in v.errors[0]
