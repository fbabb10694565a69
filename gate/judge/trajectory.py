"""The sequential A/B look by look: what each look saw and why the test stopped where it did
(the report's "how the test went" pictures).

Each look is the replay of the test (gate.judge.sequential.replay, as `gate compare` judges
an A/B) on the rounds measured up to it: round 1 (the look for gross effects), then every
whole block. It stops at the look that decided, or at the last one the rounds allow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gate.judge import sequential as seq
from gate.judge.checks import judged, per_repeat, ratio_slots, slots
from gate.judge.compare import ab_design
from gate.judge.noise import Noise
from gate.judge.verdict import Outcome
from gate.measure.results import Results
from gate.plan.thresholds import Thresholds


@dataclass(frozen=True)
class Look:
    round: int
    delta_pct: float
    llr: float | None  # None: the gross look, which has no ratio
    outcome: Outcome


@dataclass(frozen=True)
class Trajectory:
    check: str
    label: str
    looks: list[Look]
    fail_at: float
    pass_at: float
    max_rounds: int

    @property
    def why(self) -> str:
        """Why the test stopped at its last look, in one sentence."""
        last = self.looks[-1]
        llr = "" if last.llr is None else f"LLR {last.llr:+.2f}"
        if last.outcome == Outcome.FAIL and last.llr is None:
            return f"failed at round {last.round}: a gross effect, seen at the first look"
        if last.outcome == Outcome.FAIL:
            return f"failed at round {last.round}: {llr} reached the fail boundary {self.fail_at:+.2f}"
        if last.outcome == Outcome.PASS:
            return f"passed at round {last.round}: {llr} reached the pass boundary {self.pass_at:+.2f}"
        between = f"{llr}, between {self.pass_at:+.2f} and {self.fail_at:+.2f}" if llr else \
            "no whole block yet"
        if last.round >= self.max_rounds:
            return f"undecided after {last.round} rounds, the most the design allows ({between})"
        return f"undecided after {last.round} of at most {self.max_rounds} rounds ({between})"


def look_rounds(rounds: int, design: seq.Design) -> list[int]:
    """The rounds at which the test looks, up to `rounds` measured."""
    out = [1] if rounds >= 1 else []
    out += [j * design.rounds_per_block for j in range(1, design.max_blocks + 1)
            if j * design.rounds_per_block <= rounds]
    return sorted(set(out))


def trajectories(head: Results, base: Results, thresholds: Thresholds, noise: Noise
                 ) -> list[Trajectory]:
    found = judged(slots(head), thresholds) + judged(ratio_slots(head, thresholds), thresholds)
    design, calibrated = ab_design(head, base, max(len(found), 1))
    out = []
    for slot in found:
        h, b = per_repeat(head, slot), per_repeat(base, slot)
        d = [math.log(h[r] / b[r]) for r in sorted(set(h) & set(b))]
        threshold = slot.threshold(thresholds)
        if not d or threshold is None:
            continue
        spec = seq.CheckSpec(slot.name, threshold, slot.metric.direction,
                             noise.prior(slot.name, calibrated, design.rounds_per_block))
        looks = []
        for r in look_rounds(len(d), design):
            result = seq.replay(spec, d[:r], design)
            decided = result.decided_at_round is not None
            looks.append(Look(r, result.interval.mean_pct,
                              None if r < design.rounds_per_block else result.llr,
                              result.outcome if decided else Outcome.INCONCLUSIVE))
            if decided:
                break
        out.append(Trajectory(slot.name, slot.label, looks, design.fail_llr, design.pass_llr,
                              design.max_rounds))
    return out
