"""Both directions: factory results through the judge. A head decidedly better than its base
by more than the threshold is an improvement, said so in the headline and the tables and never
a failure; a smaller gain is a pass and no more."""

from __future__ import annotations

from support.calibrations import noise_for_results
from support.factories import cell, gpu_plan, make_results

from gate.judge.compare import ABReference, compare_results
from gate.judge.improvement import improvements, mark_improvements, past_threshold
from gate.judge.verdict import Check, Outcome
from gate.plan.thresholds import Thresholds
from gate.report.terminal import render_verdict

T = Thresholds()
PLAN = gpu_plan(levels=(8,), repeats=4)


def rounds(rpm: list[float], tpot: list[float], label: str = "head"):
    """A/B results of gate ab: one round per value (drain req/min, guided TPOT p50 at 8)."""
    cells = []
    for r, (drain, step) in enumerate(zip(rpm, tpot, strict=True)):
        cells += [cell("drain", "guided", 64, r, rpm=drain),
                  cell("sweep", "guided", 8, r, tpot_p50=step),
                  cell("sweep", "free", 8, r, tpot_p50=10.0)]
    res = make_results(cells, plan=gpu_plan(levels=(8,), repeats=len(rpm)), label=label)
    return res.model_copy(update={"sequential_rounds": 8, "plan_hash": PLAN.measurement_hash()})


CALIBRATED = noise_for_results(rounds([233.0], [10.0]), between=0.01, within=0.015)


def by_name(verdict, name: str) -> Check:
    return next(c for c in verdict.checks if c.name == name)


def test_a_decided_gain_past_the_threshold_is_an_improvement_in_the_headline_and_table():
    base = rounds([233.0, 235.0, 232.0, 234.0], [10.0, 10.1, 9.9, 10.0])
    head = rounds([300.0, 302.0, 298.0, 301.0], [10.0, 10.0, 10.05, 9.95])  # drain +28%
    v = compare_results(head, ABReference(base), T, noise=CALIBRATED)
    drain = by_name(v, "drain.req_per_min")
    assert drain.outcome == Outcome.PASS and drain.improved
    assert drain.ci_low_pct is not None and drain.ci_low_pct >= drain.threshold
    assert not by_name(v, "sweep.c8.tpot_p50_ms").improved  # unchanged: a plain pass
    assert v.outcome == Outcome.PASS and v.exit_code == 0
    assert v.headline.startswith("PASS: improved: drain req/min (guided) +28.")
    assert "(improved)" in render_verdict(v)


def test_a_gain_inside_the_threshold_passes_without_being_called_an_improvement():
    base = rounds([233.0, 235.0, 232.0, 234.0], [10.0, 10.1, 9.9, 10.0])
    head = rounds([240.0, 241.0, 239.0, 240.0], [10.0, 10.0, 10.05, 9.95])  # drain +3%
    v = compare_results(head, ABReference(base), T, noise=CALIBRATED)
    assert v.outcome == Outcome.PASS and not improvements(v.checks)
    assert "improved" not in v.headline


def test_an_improvement_beside_a_slowdown_is_named_after_the_failure_never_as_one():
    base = rounds([233.0, 235.0, 232.0, 234.0], [10.0, 10.1, 9.9, 10.0])
    head = rounds([300.0, 302.0, 298.0, 301.0], [20.0, 20.2, 19.8, 20.0])  # TPOT 2x, drain +28%
    v = compare_results(head, ABReference(base), T, noise=CALIBRATED)
    assert v.outcome == Outcome.FAIL
    assert v.headline.startswith("FAIL: TPOT p50")
    assert "; improved: drain req/min (guided) +28." in v.headline
    assert by_name(v, "drain.req_per_min").outcome == Outcome.PASS


def test_past_threshold_reads_each_direction():
    def rel(direction, lo, hi, outcome=Outcome.PASS):
        return Check(name="x", label="x", kind="relative", direction=direction, delta_pct=(lo + hi) / 2,
                     ci_low_pct=lo, ci_high_pct=hi, threshold=10.0, outcome=outcome)

    assert past_threshold(rel("higher_is_better", 11.0, 20.0))
    assert not past_threshold(rel("higher_is_better", 9.0, 20.0))
    assert past_threshold(rel("lower_is_better", -20.0, -10.5))
    assert not past_threshold(rel("lower_is_better", -20.0, -5.0))
    assert not past_threshold(rel("higher_is_better", 11.0, 20.0, Outcome.INCONCLUSIVE))
    marked = mark_improvements([rel("lower_is_better", -20.0, -10.5)])
    assert marked[0].improved
