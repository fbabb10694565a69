"""A/B screening without a calibration: one block can fail a gross slowdown that every round
shows, never pass, and stays undecided below the margin."""

from __future__ import annotations

import math

import pytest
from support.factories import drain_results

from gate.judge.compare import ScreeningReference, compare_results, screening_margin
from gate.judge.noise import Noise
from gate.judge.verdict import Outcome
from gate.plan.thresholds import Thresholds

T = Thresholds()


def screened(head_rpm, base_rpm):
    return compare_results(drain_results(head_rpm), ScreeningReference(drain_results(base_rpm)),
                           T, noise=Noise())


def check(verdict, name="drain.req_per_min"):
    return next(c for c in verdict.checks if c.name == name)


def test_the_margin_is_half_again_or_twice_the_fail_hypothesis():
    assert math.expm1(screening_margin(10.0)) == pytest.approx(0.50)  # never below 50%
    assert math.expm1(screening_margin(25.0)) == pytest.approx(1.375**2 - 1, abs=0.01)


def test_a_halved_drain_in_every_round_fails():
    v = screened([116.0, 121.0], [233.0, 230.0])
    assert v.outcome == Outcome.FAIL and check(v).outcome == Outcome.FAIL
    assert check(v).delta_pct == pytest.approx(-48.7, abs=0.5)
    assert "screening" in check(v).interval_source and "Screening" in v.method


def test_a_gross_round_beside_an_ordinary_one_does_not_fail():
    v = screened([116.0, 225.0], [233.0, 230.0])
    assert check(v).outcome == Outcome.INCONCLUSIVE and v.outcome == Outcome.INCONCLUSIVE


def test_one_round_decides_nothing_and_nothing_ever_passes():
    assert check(screened([116.0], [233.0])).outcome == Outcome.INCONCLUSIVE
    same = screened([233.0, 232.0], [233.0, 233.0])
    assert same.outcome == Outcome.INCONCLUSIVE and check(same).outcome == Outcome.INCONCLUSIVE
    assert any("no calibration" in n for n in same.notes)


def test_a_screened_range_is_never_shown_as_an_interval():
    """Two rounds' smallest and largest change are not a confidence interval: the headline,
    the terminal table, the comment and a bisect step all call them a range."""
    from gate.evidence.bisection import deciding_effect
    from gate.flows.bisect_result import effect_text
    from gate.report.terminal import render_verdict
    from gate.report.view import fmt_interval

    v = screened([116.0, 121.0], [233.0, 230.0])
    c = check(v)
    assert c.interval_is_range
    assert "range of its rounds" in v.headline and "(interval" not in v.headline
    assert str(fmt_interval(c)).startswith("range [")
    assert "range -" in render_verdict(v)
    assert effect_text(deciding_effect(v)).count("range of its rounds") == 1
    calibrated = c.model_copy(update={"interval_source": "2 round(s); prior: calibration"})
    assert not calibrated.interval_is_range and str(fmt_interval(calibrated)).startswith("[")
