"""The sequential design of one A/B on this runner, fixed before its first round: which checks,
how many blocks at most, what that costs, sized by the runner's calibration and checked
against the plan's budget (docs/compare.md, "Sized by the noise").

No calibration, or a design the budget cannot hold, is a `CannotDecide` raised before anything
is measured, naming the fix and its cost: the A/B never spends its budget to say inconclusive
for want of a noise estimate.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass

from gate.core.errors import CannotDecide
from gate.judge import sequential as seq
from gate.judge.checks import planned_slots
from gate.judge.noise import ENOUGH_BLOCK_DF, CalibrationDesign, Noise
from gate.judge.reach import LONGEST_BLOCKS, MAX_FACTOR, Check, longer_design, looser_thresholds
from gate.judge.sequential import ucb_factor
from gate.judge.sizing import AA_DECIDED_GOAL, MAX_BLOCKS, Cost, Sizing, size
from gate.plan.spec import Plan
from gate.plan.thresholds import Thresholds


class Uncalibrated(CannotDecide):
    """No calibration of this runner gives the spread a check needs, or too few blocks of it
    do: calibrate (`more_blocks` more, when known) first."""

    def __init__(self, message: str, more_blocks: int | None = None, *,
                 decide_with: str | None = None):
        super().__init__(message, decide_with=decide_with)
        self.more_blocks = more_blocks


class TooNoisy(CannotDecide):
    """This runner's calibration is complete, and the thresholds still cannot be decided within
    the largest design: the plan needs longer cells or looser thresholds here. An A/B can
    still screen for gross effects."""

    reason = "this runner's calibration cannot decide the thresholds"


# Blocks a calibration measures unless told otherwise: block means with ENOUGH_BLOCK_DF df.
CALIBRATION_BLOCKS = ENOUGH_BLOCK_DF + 1


@dataclass(frozen=True)
class ABDesign:
    """The test an A/B runs, and what the calibration says it achieves."""

    design: seq.Design
    sizing: Sizing
    calibrated: CalibrationDesign
    checks: tuple[str, ...]
    note: str = ""  # what the budget leaves out of the design, if anything

    def describe(self) -> str:
        return f"{len(self.checks)} checks; {self.sizing.describe()}"


def calibrated_design(plan: Plan) -> CalibrationDesign:
    return CalibrationDesign(servers=plan.ab.servers, rounds_per_block=plan.ab.rounds_per_block)


def calibration_command(plan: Plan, blocks: int = CALIBRATION_BLOCKS) -> str:
    """The command that calibrates `plan` as this run measures it: the plan as the user named
    it (a file keeps its path), the model runner the plan pins, and the command-line changes
    that made it (its backend among them; `Plan.calibrate_args`)."""
    args = ["gate", "calibrate", "--plan", plan.ref]
    pinned = plan.server.pinned_runner()
    if pinned is not None:
        args += ["--model-runner", pinned]
    return shlex.join([*args, *plan.calibrate_args, "--blocks", str(blocks)])


def design_ab(plan: Plan, thresholds: Thresholds, noise: Noise) -> ABDesign:
    """The design the calibration sizes for `plan`, or CannotDecide naming the fix."""
    calibrated = calibrated_design(plan)
    slots = planned_slots(plan, thresholds)
    checks: list[Check] = []
    missing = []
    for slot in slots:
        threshold = slot.threshold(thresholds)
        prior = noise.prior(slot.name, calibrated)
        spread = noise.pooled(slot.name, calibrated).spread_ucb()
        if prior is None or spread is None or threshold is None:
            missing.append(slot.name)
            continue
        checks.append(Check(seq.CheckSpec(slot.name, threshold, slot.metric.direction, prior),
                            spread, slot.metric.threshold_field))
    specs = [c.spec for c in checks]
    calibrate = f"{calibration_command(plan)} (or gate ab --calibrate)"
    if missing or not specs:
        raise Uncalibrated(_uncalibrated(plan, noise, missing or ["every check"]),
                           decide_with=calibrate)
    cost = noise.cost(calibrated)
    if cost is None:
        raise Uncalibrated(_uncalibrated(plan, noise, ["the cost of a block"]),
                           decide_with=calibrate)
    largest = design_blocks(plan)
    sizing = size(specs, [c.spread for c in checks], plan.ab.rounds_per_block, cost,
                  max_blocks=largest)
    if not sizing.reachable:
        block_df = min(s.prior.block_df for s in specs if s.prior is not None)
        if block_df < ENOUGH_BLOCK_DF:
            more = int(ENOUGH_BLOCK_DF - block_df)
            raise Uncalibrated(_too_noisy(plan, sizing, block_df), more_blocks=more,
                               decide_with=calibration_command(plan, more))
        would = what_would_decide(plan, checks, cost, largest)
        raise TooNoisy(_too_noisy(plan, sizing, block_df) + would,
                       decide_with=would.removeprefix("What would decide here: "))
    _check_fits(plan, sizing, noise)
    return ABDesign(sizing.design, sizing, calibrated, tuple(s.name for s in specs),
                    budget_note(plan, sizing))


def _uncalibrated(plan: Plan, noise: Noise, missing: list[str]) -> str:
    return (
        f"no calibration of this runner for plan {plan.name!r} gives the spread between server "
        f"pairs of {', '.join(missing)} ({noise.description}). Without it an A/B would run out "
        f"its budget and end inconclusive. Calibrate first: `{calibration_command(plan)}` "
        f"(A/A blocks of {plan.ab.rounds_per_block} rounds, two server starts each), or "
        "`gate ab --calibrate` to do it now and keep it in the cache folder for the next run")


def _check_fits(plan: Plan, sizing: Sizing, noise: Noise) -> None:
    """Refuse a design the runner cannot meet. A budget shorter than the design is taken when
    healthy A/Bs still decide within it (AA_DECIDED_GOAL); a change near the threshold may then
    need `gate ab --resume` to reach the design's end."""
    need = sizing.design
    if need.max_rounds > plan.ab.max_rounds:
        raise CannotDecide(
            f"this runner needs up to {need.max_rounds} rounds to decide plan {plan.name!r} "
            f"({sizing.describe()}); the plan allows {plan.ab.max_rounds}: raise --max-rounds "
            f"to {need.max_rounds}", decide_with=f"--max-rounds {need.max_rounds}")
    budget = plan.ab.budget_minutes
    decide_blocks, minutes = _to_decide(sizing)
    if budget is not None and minutes > budget:
        raise CannotDecide(
            f"a budget of {budget:g} runner minutes cannot reach a decision on this runner: "
            f"healthy A/Bs of plan {plan.name!r} need {decide_blocks} block(s), "
            f"{minutes:.0f} min, to decide {AA_DECIDED_GOAL:.0%} of the time, and the design "
            f"{sizing.minutes_max:.0f} min at most ({sizing.describe()}; {noise.description}): "
            f"raise --budget-minutes to {max(minutes, 1):.0f} (or {sizing.minutes_max:.0f} to "
            "hold the whole design)", decide_with=f"--budget-minutes {math.ceil(minutes)}")


def _to_decide(sizing: Sizing) -> tuple[int, float]:
    """The blocks, and their runner minutes, within which AA_DECIDED_GOAL of healthy A/Bs
    decide (the whole design when none is that short): what a budget must hold."""
    blocks = sizing.blocks_to_decide() or sizing.design.max_blocks
    return blocks, blocks * sizing.block_s / 60


def design_blocks(plan: Plan) -> int:
    """The most blocks a design of `plan` may have: MAX_BLOCKS, or more when the plan's
    max_rounds asks for them (up to LONGEST_BLOCKS: what `what_would_decide` may propose)."""
    return min(max(MAX_BLOCKS, plan.ab.max_rounds // plan.ab.rounds_per_block), LONGEST_BLOCKS)


def _too_noisy(plan: Plan, sizing: Sizing, block_df: float) -> str:
    text = (f"this runner's calibration cannot decide the thresholds of plan {plan.name!r} "
            f"within {sizing.design.max_blocks} blocks ({sizing.describe()}). ")
    if block_df < ENOUGH_BLOCK_DF:
        more = int(ENOUGH_BLOCK_DF - block_df)
        return text + (
            f"Its spread rests on {int(block_df) + 1} server pairs and is taken at its upper "
            f"confidence bound (x{ucb_factor(block_df):.2f}): calibrate {more} more blocks "
            f"(`{calibration_command(plan, more)}`; runs pool)")
    return text


def what_would_decide(plan: Plan, checks: list[Check], cost: Cost, largest: int) -> str:
    """The budget that would decide the plan's thresholds here, and the thresholds this
    runner decides within `largest` blocks (gate.judge.reach), as flags of `gate ab`."""
    block = plan.ab.rounds_per_block
    options = []
    longer = longer_design(checks, block, cost) if largest < LONGEST_BLOCKS else None
    if longer is not None:
        d = longer.design
        options.append(
            f"the same thresholds in up to {d.max_blocks} blocks (`--max-rounds {d.max_rounds} "
            f"--budget-minutes {math.ceil(longer.minutes_max)}`; a healthy A/B then decides in "
            f"a median of {longer.aa_minutes_median:.0f} min)")
    looser = looser_thresholds(checks, block, cost, largest)
    if looser is not None:
        flags = looser.flags()
        _, decide_minutes = _to_decide(looser.sizing)
        if plan.ab.budget_minutes is not None and decide_minutes > plan.ab.budget_minutes:
            flags += f" --budget-minutes {math.ceil(decide_minutes)}"  # as _check_fits asks
        options.append(
            f"within {looser.sizing.design.max_blocks} blocks, looser thresholds "
            f"(`{flags}`; a healthy A/B then decides in a median of "
            f"{looser.sizing.aa_minutes_median:.0f} min, {looser.sizing.minutes_max:.0f} min "
            "at most)")
    if not options:
        return (f"Neither {LONGEST_BLOCKS} blocks nor thresholds up to {MAX_FACTOR:g}x the "
                "plan's decide here: lengthen the cells (sweep.window_s: a round's noise "
                "shrinks, the spread between server pairs does not)")
    return "What would decide here: " + "; or ".join(options)


def budget_note(plan: Plan, sizing: Sizing) -> str:
    """What a budget shorter than the design leaves out, for the verdict's notes."""
    budget = plan.ab.budget_minutes
    if budget is None or sizing.minutes_max <= budget:
        return ""
    return (f"the budget ({budget:g} min) holds fewer blocks than the design "
            f"({sizing.minutes_max:.0f} min): a change near its threshold may end inconclusive "
            "here; gate ab --resume continues the same test")
