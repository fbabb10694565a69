"""What would decide a plan on a runner whose calibration cannot decide its thresholds within
the design's largest size: the same thresholds in a longer design, or looser thresholds in the
same one (docs/compare.md, "Sized by the noise").

Both answers come from the same simulation that sizes every A/B (gate.judge.sizing), so the
figures they state (blocks, minutes, median time to a healthy pass) are the ones `gate ab`
would then run to. The threshold search is greedy: it raises, one step at a time, the threshold
of the check furthest from its goals (a miss at 1.5x the threshold, or too few healthy passes
within the design), until every goal is met or a threshold has tripled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from gate.judge import sequential as seq
from gate.judge.sizing import AA_DECIDED_GOAL, MISS_GOAL, RunnerCost, Sizing, Spread, size

# The longest design an answer proposes: 60 blocks of 2 rounds on a 2-core runner are about
# five runner hours, past any CI job's patience, so nothing longer is worth naming.
LONGEST_BLOCKS = 60
STEP_PCT = 5.0  # a threshold is raised by whole steps of 5 points (10% -> 15% -> 20%)
MAX_FACTOR = 3.0  # no threshold is proposed at more than three times the plan's


@dataclass(frozen=True)
class SizedCheck:
    """One sized check, with the threshold field (gate.plan.thresholds) that sets it."""

    spec: seq.CheckSpec
    spread: Spread
    field: str


@dataclass(frozen=True)
class Looser:
    """Thresholds this runner decides within the design: only the fields that changed."""

    thresholds: dict[str, float]
    sizing: Sizing

    def flags(self) -> str:
        return " ".join(f"--threshold {k}={v:g}" for k, v in sorted(self.thresholds.items()))


def longer_design(checks: Sequence[SizedCheck], rounds_per_block: int, cost: RunnerCost,
                  longest: int = LONGEST_BLOCKS) -> Sizing | None:
    """The shortest design up to `longest` blocks that meets the goals at the plan's
    thresholds, or None."""
    sizing = size([c.spec for c in checks], [c.spread for c in checks], rounds_per_block, cost,
                  max_blocks=longest)
    return sizing if sizing.reachable else None


def looser_thresholds(checks: Sequence[SizedCheck], rounds_per_block: int, cost: RunnerCost,
                      max_blocks: int) -> Looser | None:
    """The smallest raise (greedy, in STEP_PCT steps) of the thresholds that lets a design of
    at most `max_blocks` meet the goals, or None when one would pass MAX_FACTOR first."""
    plan_values = {c.field: c.spec.threshold_pct for c in checks}

    def sized(values: dict[str, float]) -> Sizing:
        specs = [replace(c.spec, threshold_pct=values[c.field]) for c in checks]
        return size(specs, [c.spread for c in checks], rounds_per_block, cost,
                    max_blocks=max_blocks)

    # Hopeless at the loosest thresholds considered: one simulation says so, not a search.
    if not sized({k: MAX_FACTOR * v for k, v in plan_values.items()}).reachable:
        return None
    values = dict(plan_values)
    while True:
        sizing = sized(values)
        if sizing.reachable:
            changed = {k: v for k, v in values.items() if v != plan_values[k]}
            return Looser(changed, sizing) if changed else None
        worst = _furthest_from_goals(sizing)
        if worst is None:
            return None  # only the false-fail goal is missed: a wider threshold cannot help
        field = checks[worst].field
        raised = (math.floor(values[field] / STEP_PCT) + 1) * STEP_PCT
        if raised > MAX_FACTOR * plan_values[field]:
            return None
        values[field] = raised


def _furthest_from_goals(sizing: Sizing) -> int | None:
    """The check whose miss or healthy-pass rate is furthest past its goal (as a multiple of
    the goal's allowance), or None when every check meets both."""
    scores = [max(miss / MISS_GOAL, (1.0 - passed) / (1.0 - AA_DECIDED_GOAL))
              for miss, passed in zip(sizing.misses, sizing.passed, strict=True)]
    worst = max(range(len(scores)), key=scores.__getitem__)
    return worst if scores[worst] > 1.0 else None
