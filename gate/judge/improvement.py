"""Both directions: a check whose head is decidedly better than its base by more than the
threshold is an improvement, said as such in the headline and the table, and never a failure
(docs/compare.md#improvements).

Decided means: the check passed (the sequential test settled "no slowdown past the
threshold") and its whole shown interval lies beyond the threshold on the good side, e.g. a
drain req/min of +15% with an interval of +11% .. +19% against a threshold of 10%. A change
the interval does not place past the threshold is only "better", never claimed. Screening
(no calibration) decides an improvement as it decides a failure: every round of its block
better by the gross margin (gate.judge.compare.ScreeningReference).
"""

from __future__ import annotations

from gate.judge.checks import HIGHER
from gate.judge.verdict import Check, Outcome


def past_threshold(c: Check) -> bool:
    """The whole interval of a passed relative check lies past its threshold the good way."""
    if c.kind != "relative" or c.outcome != Outcome.PASS:
        return False
    if c.ci_low_pct is None or c.ci_high_pct is None:
        return False
    if c.direction == HIGHER:
        return c.ci_low_pct >= c.threshold
    return c.ci_high_pct <= -c.threshold


def mark_improvements(checks: list[Check]) -> list[Check]:
    """The checks with `improved` set where the interval decides it (a check a judge marked
    improved already, a screened one, stays so)."""
    return [c if c.improved or not past_threshold(c)
            else c.model_copy(update={"improved": True}) for c in checks]


def improvements(checks: list[Check]) -> list[Check]:
    """The improved checks, the largest change first."""
    return sorted((c for c in checks if c.improved), key=lambda c: -abs(c.delta_pct or 0.0))
