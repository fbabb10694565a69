"""What a bisect's steps conclude when the endpoints already decide (gate.flows.bisect_result:
no search, no git), and how an effect reads."""

from __future__ import annotations

import pytest

from gate.evidence.bisect_record import BisectOutcome, BisectState, CommitInfo, StepRecord
from gate.evidence.bisection import Effect, StepVerdict
from gate.flows.bisect_result import assemble, effect_text, runner_seconds
from gate.judge.verdict import Outcome

GOOD, BAD = "a" * 40, "b" * 40


def state(verdict: StepVerdict, outcome: Outcome | None, reason: str = "") -> BisectState:
    step = StepRecord(number=1, commit=BAD, role="endpoints", verdict=verdict, outcome=outcome,
                      seconds=120.0, reason=reason,
                      effect=Effect(check="drain.req_per_min", label="drain req/min",
                                    delta_pct=-3.0, ci_low_pct=-9.0, ci_high_pct=2.5))
    return BisectState(repo="/r", good=CommitInfo(sha=GOOD), bad=CommitInfo(sha=BAD),
                       plan_hash="h", commits=[CommitInfo(sha=BAD)], steps=[step],
                       overhead_s=60.0)


@pytest.mark.parametrize(("verdict", "outcome", "expected", "said"), [
    (StepVerdict.GOOD, Outcome.PASS, BisectOutcome.NO_REGRESSION, "is not slower than"),
    (StepVerdict.SKIPPED, Outcome.INCONCLUSIVE, BisectOutcome.INCONCLUSIVE, "stayed undecided"),
    (StepVerdict.SKIPPED, Outcome.ERROR, BisectOutcome.ERROR, "could not be measured: died"),
])
def test_endpoints_that_are_not_a_regression_end_the_bisect(tmp_path, verdict, outcome,
                                                            expected, said):
    result = assemble(state(verdict, outcome, reason="died"), tmp_path, ["**"])
    assert result.outcome == expected and said in result.headline
    assert result.first_bad is None and result.hunks is None
    assert result.runner_seconds == 180.0


def test_an_effect_reads_as_change_and_interval():
    effect = Effect(check="c", label="drain output tok/s", delta_pct=-45.21, ci_low_pct=-51.0,
                    ci_high_pct=-38.9)
    assert effect_text(effect) == "drain output tok/s -45.2% (-51.0% .. -38.9%)"
    assert effect_text(None) == "no relative check was judged"
    assert runner_seconds(state(StepVerdict.GOOD, Outcome.PASS)) == 180.0
