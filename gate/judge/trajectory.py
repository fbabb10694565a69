"""The sequential A/B look by look: what each look saw and why the test stopped where it did
(the report's "how the test went" pictures).

Each look is the replay of the test (gate.judge.sequential.replay, as `gate compare` judges
an A/B) on the rounds measured up to it, one look per whole block: the first is the look for
gross effects, the later ones the t test on block means. It stops at the look that decided,
or at the last one the rounds allow. What a look shows is the change (%) and its interval
against the check's threshold: what the test compares, in the units a person reads.
"""

from __future__ import annotations

from gate.judge import sequential as seq
from gate.judge.checks import HIGHER, judged, per_repeat, ratio_slots, slots
from gate.judge.compare import ab_design
from gate.judge.looks import Look, Trajectory
from gate.judge.noise import Noise
from gate.judge.verdict import Outcome
from gate.measure.results import Results
from gate.plan.thresholds import Thresholds


def look_rounds(rounds: int, design: seq.Design) -> list[int]:
    """The rounds at which the test looks (every whole block), up to `rounds` measured."""
    return [j * design.rounds_per_block for j in range(1, design.max_blocks + 1)
            if j * design.rounds_per_block <= rounds]


def trajectories(head: Results, base: Results, thresholds: Thresholds, noise: Noise
                 ) -> list[Trajectory]:
    found = judged(slots(head), thresholds) + judged(ratio_slots(head, thresholds), thresholds)
    design, calibrated = ab_design(head, base, max(len(found), 1))
    out = []
    for slot in found:
        h, b = per_repeat(head, slot), per_repeat(base, slot)
        pairs = [seq.RoundPair(r, b[r], h[r]) for r in sorted(set(h) & set(b))]
        threshold = slot.threshold(thresholds)
        if not pairs or threshold is None:
            continue
        spec = seq.CheckSpec(slot.name, threshold, slot.metric.direction,
                             noise.prior(slot.name, calibrated, design.rounds_per_block))
        looks = []
        for r in look_rounds(len(pairs), design):
            result = seq.replay(spec, [p for p in pairs if p.round < r], design)
            decided = result.decided_at_round is not None
            shown = result.block_range if result.gross else result.interval
            if shown is None:
                continue
            looks.append(Look(round=r, delta_pct=shown.mean_pct,
                              low_pct=None if result.gross else shown.lo_pct,
                              high_pct=None if result.gross else shown.hi_pct,
                              outcome=result.outcome if decided else Outcome.INCONCLUSIVE,
                              gross=result.gross))
            if decided:
                break
        if looks:
            signed = -threshold if slot.metric.direction == HIGHER else threshold
            out.append(Trajectory(check=slot.name, label=slot.label, looks=looks,
                                  threshold_pct=signed, max_rounds=design.max_rounds))
    return out
