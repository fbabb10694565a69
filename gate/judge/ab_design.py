"""The sequential design of one A/B on this runner, fixed before its first round: which checks,
how many blocks at most, what a calibration says they cost and decide (docs/compare.md,
"Sized by the noise").

A calibration is a prior that shortens the test, never a precondition. Without one (or
without one for some check) the test runs on the plan's limits and learns the runner's noise
from its own blocks: its false fails are bounded whatever the noise, and it decides as soon
as its own blocks allow. With one, the design is sized by simulating the test at the
calibrated noise: the fewest blocks (within the plan's limits) in which a change of 1.5x a
threshold fails at least 90% of the time and healthy A/Bs decide. When the plan's limits or
budget hold fewer, the A/B still runs, and its notes say what the calibration predicts there
and what would meet the goals.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass

from gate.judge import sequential as seq
from gate.judge.checks import Slot, planned_slots
from gate.judge.noise import ENOUGH_BLOCK_DF, CalibrationDesign, Noise
from gate.judge.reach import (
    LONGEST_BLOCKS,
    MAX_FACTOR,
    SizedCheck,
    longer_design,
    looser_thresholds,
)
from gate.judge.sizing import AA_DECIDED_GOAL, MISS_GOAL, RunnerCost, Sizing, size
from gate.judge.verdict import Verdict, undecided_verdict
from gate.plan.spec import Plan
from gate.plan.thresholds import Thresholds

# Blocks a calibration measures unless told otherwise: block means with ENOUGH_BLOCK_DF df.
CALIBRATION_BLOCKS = ENOUGH_BLOCK_DF + 1


@dataclass(frozen=True, kw_only=True)
class ABDesign:
    """The test an A/B runs, and what the calibration (if any) says it achieves."""

    design: seq.Design
    sizing: Sizing | None  # None: no calibration for every check; the run learns its noise
    calibrated: CalibrationDesign
    checks: tuple[str, ...]
    block_s: float | None = None  # a block's runner seconds, from the calibration's cost
    notes: tuple[str, ...] = ()  # what the calibration predicts beyond the design, if anything

    def describe(self) -> str:
        if self.sizing is not None:
            return f"{len(self.checks)} checks; {self.sizing.describe()}"
        d = self.design
        return (f"{len(self.checks)} checks; {d.max_blocks} block(s) of {d.rounds_per_block} "
                f"rounds at most ({d.max_rounds} rounds); no calibration sizes it: the test "
                f"learns this runner's noise from its own blocks and decides from block "
                f"{seq.FIRST_LOOK} on (false fail at most {seq.ALPHA:.0%} at any change up to "
                "the thresholds, whatever the noise)")

    @property
    def note(self) -> str:
        return "; ".join(self.notes)


@dataclass(frozen=True, kw_only=True)
class NoDesign:
    """Why no A/B can start on this runner, known before anything is measured: the plan
    judges no check, its budget holds no block, or a calibration was asked for and none
    applies (`uncalibrated`: `gate ab --calibrate` calibrates, then starts). Its verdict is
    undecided (exit 5), naming what would decide."""

    why: str
    decide_with: str | None = None
    uncalibrated: bool = False

    def verdict(self) -> Verdict:
        return undecided_verdict(self.why, decide_with=self.decide_with)


def calibrated_design(plan: Plan) -> CalibrationDesign:
    return CalibrationDesign(servers=plan.ab.servers, rounds_per_block=plan.ab.rounds_per_block,
                             isolation=plan.ab.isolation)


def calibration_command(plan: Plan, blocks: int = CALIBRATION_BLOCKS) -> str:
    """The command that calibrates `plan` as this run measures it: the plan as the user named
    it (a file keeps its path), the model runner the plan pins, and the command-line changes
    that made it (its backend among them; `Plan.calibrate_args`)."""
    args = ["gate", "calibrate", "--plan", plan.ref]
    pinned = plan.server.pinned_runner()
    if pinned is not None:
        args += ["--model-runner", pinned]
    return shlex.join([*args, *plan.calibrate_args, "--blocks", str(blocks)])


def design_blocks(plan: Plan) -> int:
    """The most blocks a design of `plan` may have: its max_rounds' whole blocks, up to
    LONGEST_BLOCKS (the horizon of the test's levels)."""
    return max(min(plan.ab.max_rounds // plan.ab.rounds_per_block, LONGEST_BLOCKS), 1)


def design_ab(plan: Plan, thresholds: Thresholds, *, noise: Noise,
              require_calibration: bool = False, advise: bool = True) -> ABDesign | NoDesign:
    """The design for `plan` on this runner: sized by the calibration when one covers every
    check, else the plan's limits (NoDesign instead, when `require_calibration`); NoDesign when
    the plan judges no check or its budget holds no block.
    `advise` False leaves out the search for what would meet the goals (its notes only: the
    design is the same; the simulation of many calibrations skips it)."""
    calibrated = calibrated_design(plan)
    slots = planned_slots(plan, thresholds)
    if not slots:
        return NoDesign(why=f"plan {plan.name!r} judges no check in an A/B: nothing to decide")
    names = tuple(slot.name for slot in slots)
    checks, missing = _sized_checks(slots, thresholds, noise=noise, calibrated=calibrated)
    cost = noise.cost(calibrated)
    if missing or cost is None:
        what = missing if missing else ["the cost of a block"]
        if require_calibration:
            return NoDesign(why=_uncalibrated(plan, noise, missing=what), uncalibrated=True,
                            decide_with=f"{calibration_command(plan)} (or gate ab --calibrate)")
        return ABDesign(design=seq.Design(plan.ab.rounds_per_block, design_blocks(plan),
                                          len(slots), plan.ab.servers == "per_round"),
                        sizing=None, calibrated=calibrated, checks=names,
                        notes=(_learning(plan, noise, missing=what),))
    if (no_block := _no_block_fits(plan, cost, noise=noise)) is not None:
        return no_block
    return _sized(plan, checks, cost=cost, calibrated=calibrated, names=names, advise=advise)


def _sized_checks(slots: list[Slot], thresholds: Thresholds, *, noise: Noise,
                  calibrated: CalibrationDesign) -> tuple[list[SizedCheck], list[str]]:
    """Each judged check with the calibration's prior and spread; the names of those it lacks."""
    checks: list[SizedCheck] = []
    missing = []
    for slot in slots:
        threshold = slot.threshold(thresholds)
        prior = noise.prior(slot.name, calibrated)
        spread = noise.pooled(slot.name, calibrated).spread_ucb()
        assert threshold is not None  # planned_slots keeps only judged checks
        if prior is None or spread is None:
            missing.append(slot.name)
            continue
        checks.append(SizedCheck(seq.CheckSpec(slot.name, threshold, slot.metric.direction, prior),
                            spread, slot.metric.threshold_field))
    return checks, missing


def _no_block_fits(plan: Plan, cost: RunnerCost, *, noise: Noise) -> NoDesign | None:
    """A budget shorter than one block of the calibrated cost: no A/B can decide within it."""
    block_min = cost.block_s(plan.ab.rounds_per_block) / 60
    budget = plan.ab.budget_minutes
    if budget is None or budget >= block_min:
        return None
    return NoDesign(
        why=f"a budget of {budget:g} runner minutes holds no block of plan {plan.name!r} on "
        f"this runner (a block takes {block_min:.1f} min, {noise.description}): raise "
        f"--budget-minutes to at least {math.ceil(block_min)}",
        decide_with=f"--budget-minutes {math.ceil(block_min)}")


def _sized(plan: Plan, checks: list[SizedCheck], *, cost: RunnerCost,
           calibrated: CalibrationDesign, names: tuple[str, ...], advise: bool) -> ABDesign:
    """The fewest blocks, within the plan's, that meet the goals at the calibrated noise (the
    plan's blocks when none do), and the notes on what they leave out."""
    largest = design_blocks(plan)
    sizing = size([c.spec for c in checks], [c.spread for c in checks],
                  plan.ab.rounds_per_block, cost, max_blocks=largest)
    short = _short(plan, checks, sizing=sizing, cost=cost, largest=largest) if advise else ""
    notes = [n for n in (short, budget_note(plan, sizing)) if n]
    return ABDesign(design=sizing.design, sizing=sizing, calibrated=calibrated, checks=names,
                    block_s=sizing.block_s, notes=tuple(notes))


def _learning(plan: Plan, noise: Noise, *, missing: list[str]) -> str:
    return (f"no calibration of this runner for plan {plan.name!r} gives the spread between "
            f"server pairs of {', '.join(missing)} ({noise.description}): this A/B learns it "
            f"from its own blocks. A calibration shortens the next ones: "
            f"`{calibration_command(plan)}`, or add this runner's trusted runs to it "
            "(`gate calibrate --add`)")


def _uncalibrated(plan: Plan, noise: Noise, *, missing: list[str]) -> str:
    return (
        f"no calibration of this runner for plan {plan.name!r} gives the spread between server "
        f"pairs of {', '.join(missing)} ({noise.description}). Calibrate first: "
        f"`{calibration_command(plan)}` (A/A blocks of {plan.ab.rounds_per_block} rounds, two "
        "server starts each), or `gate ab --calibrate` to do it now and keep it in the cache "
        "folder; or run without --no-screening: the A/B then learns the runner's noise from "
        "its own blocks")


def _short(plan: Plan, checks: list[SizedCheck], *, sizing: Sizing, cost: RunnerCost,
           largest: int) -> str:
    """What the calibration predicts when the plan's blocks miss the goals, and what would
    meet them; empty when they are met."""
    if sizing.reachable:
        return ""
    block_df = min(c.spec.prior.block_df for c in checks if c.spec.prior is not None)
    text = (f"at this runner's calibrated noise, {largest} blocks decide less than the goals "
            f"ask (miss at 1.5x a threshold {sizing.miss:.1%}, goal {MISS_GOAL:.0%}; healthy "
            f"decided {sizing.aa_decided:.0%}, goal {AA_DECIDED_GOAL:.0%}): a change near a "
            "threshold may end inconclusive (gate ab --resume continues the same test). ")
    if block_df < ENOUGH_BLOCK_DF:
        more = int(ENOUGH_BLOCK_DF - block_df)
        text += (f"The calibration rests on {int(block_df) + 1} server pairs and is sized at its "
                 f"upper confidence bound (x{seq.ucb_factor(block_df):.2f}): calibrating {more} "
                 f"more blocks (`{calibration_command(plan, more)}`; runs pool) may be enough. ")
    return text + what_would_decide(plan, checks, cost=cost, largest=largest)


def what_would_decide(plan: Plan, checks: list[SizedCheck], *, cost: RunnerCost,
                      largest: int) -> str:
    """The design that would meet the goals at the plan's thresholds here, and the thresholds
    this runner meets them for within `largest` blocks (gate.judge.reach), as flags of
    `gate ab`."""
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
            flags += f" --budget-minutes {math.ceil(decide_minutes)}"
        options.append(
            f"within {looser.sizing.design.max_blocks} blocks, looser thresholds "
            f"(`{flags}`; a healthy A/B then decides in a median of "
            f"{looser.sizing.aa_minutes_median:.0f} min, {looser.sizing.minutes_max:.0f} min "
            "at most)")
    if not options:
        return (f"Neither {LONGEST_BLOCKS} blocks nor thresholds up to {MAX_FACTOR:g}x the "
                "plan's meet the goals here: lengthen the cells (sweep.window_s: a round's "
                "noise shrinks, the spread between server pairs does not) or lower the "
                "runner's noise (docs/compare.md, \"Less noise at the source\")")
    return "What would meet them here: " + "; or ".join(options)


def _to_decide(sizing: Sizing) -> tuple[int, float]:
    """The blocks, and their runner minutes, within which AA_DECIDED_GOAL of healthy A/Bs
    decide (the whole design when none is that short): what a budget must hold."""
    blocks = sizing.blocks_to_decide() or sizing.design.max_blocks
    return blocks, blocks * sizing.block_s / 60


def budget_note(plan: Plan, sizing: Sizing) -> str:
    """What a budget shorter than the design leaves out, for the verdict's notes."""
    budget = plan.ab.budget_minutes
    if budget is None or sizing.minutes_max <= budget:
        return ""
    blocks, minutes = _to_decide(sizing)
    healthy = (f"healthy A/Bs need {blocks} block(s), {minutes:.0f} min, to decide "
               f"{AA_DECIDED_GOAL:.0%} of the time here: raise --budget-minutes to "
               f"{math.ceil(minutes)}; " if minutes > budget else "")
    return (f"the budget ({budget:g} min) holds fewer blocks than the design "
            f"({sizing.minutes_max:.0f} min): {healthy}a change near its threshold may end "
            "inconclusive here; gate ab --resume continues the same test")
