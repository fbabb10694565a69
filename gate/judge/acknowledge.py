"""An intended slowdown, acknowledged: a maintainer's word (kept in the history file, checked
for write access when given) turns one failing check of one head commit neutral.

Only that check, only at that head: an acknowledgement of an earlier push is not carried to a
new one (the new code may be slower still), and says so in the verdict's notes. The check keeps
its figures and its own outcome; the verdict's outcome is the worst of the other checks, so a
verdict whose every failing check is acknowledged passes, and one with a second failing check,
an inconclusive check or an error stays as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

from gate.core.text import one_line
from gate.judge.verdict import Acknowledged, Outcome, Verdict, worst


@dataclass(frozen=True, kw_only=True)
class Acknowledgement:
    """What the judge reads of an acknowledgement (the history file keeps the whole record:
    gate.history.model.Acknowledgement)."""

    check: str
    login: str
    reason: str
    head_sha: str
    at: str = ""


def mark(a: Acknowledgement) -> Acknowledged:
    """What an acknowledged check carries in the verdict: who, why (one line), which head."""
    return Acknowledged(login=a.login, reason=one_line(a.reason, 300), head_sha=a.head_sha,
                        at=a.at)


def unheld(verdict: Verdict, acks: list[Acknowledgement], head_sha: str) -> list[str]:
    """The checks whose acknowledgement no kept one of `head_sha` matches. A verdict written
    by a job that ran the code under test may claim an acknowledgement nobody gave."""
    here = [a for a in acks if a.head_sha == head_sha]
    return [c.name for c in verdict.checks if c.acknowledged is not None
            and not any(a.check == c.name and mark(a) == c.acknowledged for a in here)]


def apply_acknowledgements(verdict: Verdict, acks: list[Acknowledgement], head_sha: str
                           ) -> Verdict:
    """`verdict` with the acknowledgements of `head_sha` applied to its failing checks. Applying
    them again changes nothing: the measuring job applies them and the poster again, with the
    acknowledgements given since."""
    here = {a.check: a for a in acks if a.head_sha == head_sha}
    stale = sorted({(a.check, a.head_sha) for a in acks if a.head_sha != head_sha})
    names = {c.name for c in verdict.checks}
    checks, notes, used = [], list(verdict.notes), []
    for c in verdict.checks:
        a = here.get(c.name)
        if a is not None and c.outcome == Outcome.FAIL and c.acknowledged is None:
            c = c.model_copy(update={"acknowledged": mark(a)})
            used.append(c)
        checks.append(c)
    new = [f"{check} was acknowledged at {sha[:12]}, not at this head {head_sha[:12]}: a new "
           "push needs a new acknowledgement" for check, sha in stale
           if check in names and check not in here]
    acked = {c.name for c in checks if c.acknowledged}
    new += [f"{a.check}: acknowledged by {a.login}, but it did not fail here"
            for a in here.values() if a.check not in acked]
    new += [f"{c.label}: slowdown acknowledged by {c.acknowledged.login}: "
            f"{c.acknowledged.reason}" for c in used if c.acknowledged]
    notes += [n for n in new if n not in notes]
    if not used:
        return verdict.model_copy(update={"notes": notes})
    outcome = verdict.outcome
    if not verdict.errors and outcome == Outcome.FAIL:
        outcome = worst([c.outcome for c in checks if c.acknowledged is None])
    headline = verdict.headline
    if outcome != verdict.outcome:
        labels = ", ".join(c.label for c in used)
        headline = (f"{outcome.value.upper()}: intended slowdown acknowledged ({labels}); "
                    f"was: {verdict.headline}")
    return verdict.model_copy(update={"checks": checks, "notes": notes, "outcome": outcome,
                                      "headline": one_line(headline, 1000)})
