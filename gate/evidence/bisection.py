"""Which commit a bisect measures next, and what the measured steps conclude (pure functions;
the measuring is gate.flows.bisect). docs/bisect.md#the-search.

The commits are the first-parent history from the good commit (exclusive) to the bad one
(inclusive), oldest first, as `git bisect --first-parent` walks it. Each measured commit is
`bad` (its A/B against the good build failed), `good` (it passed) or `skipped` (it could not
be built, imported or served, or its A/B stayed inconclusive): like `git bisect skip`, a
skipped commit is never blamed and the search goes on around it. The first bad commit lies
after the last good commit below the first bad one; the next commit measured is the untested
one there that leaves the fewest candidates in the worse case, so n commits take at most
ceil(log2 n) steps when nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from gate.judge.verdict import Check, Outcome, Verdict


class StepVerdict(str, Enum):
    BAD = "bad"
    GOOD = "good"
    SKIPPED = "skipped"


def step_verdict(outcome: Outcome | None, screened: bool = False) -> StepVerdict:
    """What an A/B of a commit against the good build says about the commit. Screened (no
    calibration: one block found no gross slowdown) counts as good: the bisect then looks for
    the first commit with a gross slowdown, as its endpoints were screened for."""
    if outcome is None:
        return StepVerdict.GOOD if screened else StepVerdict.SKIPPED
    return {Outcome.FAIL: StepVerdict.BAD, Outcome.PASS: StepVerdict.GOOD}.get(
        outcome, StepVerdict.SKIPPED)


class Effect(BaseModel):
    """The check that decided a step: its change and interval, in percent."""

    model_config = ConfigDict(extra="forbid")

    check: str
    label: str
    delta_pct: float | None = None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    threshold: float | None = None
    interval_is_range: bool = Field(False, description="screened: the rounds' smallest and "
                                    "largest change, not a confidence interval")


def deciding_effect(verdict: Verdict) -> Effect | None:
    """The relative check that speaks for the verdict: the worst outcome first, then the
    largest change; None when no relative check was judged."""
    order = {Outcome.ERROR: 0, Outcome.FAIL: 1, Outcome.UNDECIDED: 2, Outcome.INCONCLUSIVE: 2,
             Outcome.PASS: 3}
    checks = [c for c in verdict.checks if c.kind == "relative" and c.delta_pct is not None]
    if not checks:
        return None
    best: Check = min(checks, key=lambda c: (order[c.outcome], -abs(c.delta_pct or 0.0)))
    return Effect(check=best.name, label=best.label, delta_pct=best.delta_pct,
                  ci_low_pct=best.ci_low_pct, ci_high_pct=best.ci_high_pct,
                  threshold=best.threshold, interval_is_range=best.interval_is_range)


class Bounds(BaseModel):
    """Indices into the commits: the last good one below the first bad one (-1: the good
    endpoint) and the first bad one."""

    last_good: int
    first_bad: int


def bounds(commits: Sequence[str], verdicts: Mapping[str, StepVerdict]) -> Bounds:
    bad = [i for i, c in enumerate(commits) if verdicts.get(c) == StepVerdict.BAD]
    first_bad = min(bad, default=len(commits) - 1)
    good = [i for i, c in enumerate(commits[:first_bad]) if verdicts.get(c) == StepVerdict.GOOD]
    return Bounds(last_good=max(good, default=-1), first_bad=first_bad)


def next_commit(commits: Sequence[str], verdicts: Mapping[str, StepVerdict]) -> str | None:
    """The commit to measure next; None when every candidate is measured or skipped."""
    b = bounds(commits, verdicts)
    untested = [i for i in range(b.last_good + 1, b.first_bad) if commits[i] not in verdicts]
    if not untested:
        return None
    # bad: the first bad is in (last_good, i], good: in (i, first_bad]; the worse of the two
    best = min(untested, key=lambda i: (max(i - b.last_good, b.first_bad - i), -i))
    return commits[best]


class Conclusion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    first_bad: str | None = Field(None, description="named when no skipped commit hides it")
    candidates: list[str] = Field(
        default_factory=list, description="the commits the first bad one may be, oldest first: "
        "the skipped commits between the last good and the first bad one, then that bad one")
    inconsistent: list[str] = Field(
        default_factory=list, description="commits measured good after a bad one: the "
        "slowdown is not monotone over the range (noise, or fixed and broken again)")


def conclude(commits: Sequence[str], verdicts: Mapping[str, StepVerdict]) -> Conclusion:
    b = bounds(commits, verdicts)
    between = list(commits[b.last_good + 1:b.first_bad])
    late_good = [c for c in commits[b.first_bad + 1:] if verdicts.get(c) == StepVerdict.GOOD]
    culprit = commits[b.first_bad]
    if between:
        return Conclusion(candidates=[*between, culprit], inconsistent=late_good)
    return Conclusion(first_bad=culprit, candidates=[culprit], inconsistent=late_good)
