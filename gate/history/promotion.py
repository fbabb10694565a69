"""Whether a default-branch run may become the stored baseline: never a regressed night.

Refused when the run is slower than the baseline it would replace (gate compare --baseline's
verdict fails), unless every failing check is a slowdown acknowledged in the history (the
baseline then moves, with the acknowledgements named in its provenance); and refused when
detection (changepoints.json) says the series of this plan and runner class stands regressed:
an unacknowledged change point for the worse, or a latest night worse than its level.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gate.history.model import Detection
from gate.judge.verdict import Outcome, Verdict


@dataclass(frozen=True)
class Promotion:
    refused: list[str] = field(default_factory=list)
    acknowledged: list[str] = field(default_factory=list)  # for the baseline's provenance

    @property
    def allowed(self) -> bool:
        return not self.refused


def promotion(comparison: Verdict | None, detection: Detection | None, *, plan: str,
              runner_class: str) -> Promotion:
    """`comparison`: the run judged against the baseline it would replace (None: no stored
    baseline); `detection`: the change points of the history including this run."""
    series = detection.for_run(plan, runner_class) if detection else []
    acked = {sd.check: cp.acknowledged for sd in series for cp in sd.change_points[-1:]
             if cp.acknowledged is not None}
    refused, noted = [], []
    if comparison is not None and comparison.outcome == Outcome.FAIL:
        for c in comparison.checks:
            if c.outcome != Outcome.FAIL:
                continue
            ack = acked.get(c.name)
            if ack is None:
                refused.append(f"{c.label}: {c.delta_pct:+.1f}% against the stored baseline"
                               if c.delta_pct is not None else f"{c.label}: fails against the "
                               "stored baseline")
            else:
                noted.append(f"{c.name} slower on purpose: PR {ack.pr}, acknowledged by "
                             f"{ack.login}: {ack.reason}")
    for sd in series:
        if sd.latest_regressed:
            refused.append(f"{sd.label}: {sd.why} (gate history detect)")
    return Promotion(refused, noted)
