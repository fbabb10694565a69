"""What a runner needs to decide a plan's thresholds: the number of blocks of rounds, their
runner minutes, and the error rates at no change, at the thresholds and at 1.5x them, by
simulating the sequential test itself (gate.judge.sequential) at the noise a calibration
measured (docs/compare.md, "Sized by the noise").

The model of one round of a check: each build's log figure has its own round noise (sd
`within` / sqrt 2, so that the paired log ratio d varies by `within` around its block's mean),
and d carries the block's server pair offset (sd `between`) and the change; pairs are
independent, as are the checks (a simplification: cells of one round are correlated, which
makes the verdict's joint rates a little better than these).

The test's false fails are bounded by construction (alpha over the family, at any change up
to the thresholds, whatever the noise): the sizing reports them, and sizes the design by what
the noise does decide, the misses at 1.5x a threshold and how soon healthy A/Bs pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from gate.judge import sequential as seq

# Goals per verdict (issue: error rates stated per plan and met at both ends).
FALSE_FAIL_GOAL = seq.ALPHA  # fail at any change up to the thresholds (by construction)
MISS_GOAL = 0.10  # not fail at a change of 1.5x a check's threshold, within the design
AA_DECIDED_GOAL = 0.90  # healthy A/B verdicts that end decided (pass) within the design
MAX_BLOCKS = 20  # the longest design considered
PATHS = 2000
SEED = 20261201


@dataclass(frozen=True)
class Spread:
    """What the simulation draws for one check (log scale, sd)."""

    between: float  # a server pair's offset
    within: float  # one round around its pair's offset

    def block_sd(self, rounds_per_block: int, pairs_per_block: int = 1) -> float:
        return math.sqrt(self.between**2 / pairs_per_block + self.within**2 / rounds_per_block)


@dataclass(frozen=True)
class RunnerCost:
    """Runner seconds of an A/B's parts, both builds together."""

    pair_s: float  # start, warm up and stop both builds' servers once
    round_s: float  # one round of every cell on both builds
    per_round_servers: bool = False  # a fresh pair of servers every round

    def block_s(self, rounds_per_block: int) -> float:
        if self.per_round_servers:
            return rounds_per_block * (self.pair_s + self.round_s)
        return self.pair_s + rounds_per_block * self.round_s


@dataclass(frozen=True)
class Sizing:
    """A design for this runner and what it achieves (rates per verdict)."""

    design: seq.Design
    reachable: bool  # the miss and healthy-decided goals met within the design
    false_fail: float  # at no change, any check failing
    miss: float  # the worst check at 1.5x its threshold
    aa_decided: float  # no change: every check passed within the design
    aa_rounds_median: float
    regression_rounds_median: float  # the worst check at 1.5x its threshold
    block_s: float
    # healthy A/Bs decided within 1, 2, ... blocks (what a budget shorter than the design buys)
    aa_decided_by: tuple[float, ...] = ()
    # per check, in the order sized: its miss at 1.5x its threshold, and how often it passed
    # at no change within the design (what keeps a design from its goals: gate.judge.reach)
    misses: tuple[float, ...] = ()
    passed: tuple[float, ...] = ()
    false_fail_at_threshold: float = 0.0  # every check at its threshold, any failing

    def blocks_to_decide(self, goal: float = AA_DECIDED_GOAL) -> int | None:
        """The fewest blocks within which `goal` of healthy A/Bs decide."""
        return next((i + 1 for i, rate in enumerate(self.aa_decided_by) if rate >= goal), None)

    @property
    def minutes_max(self) -> float:
        return self.design.max_blocks * self.block_s / 60.0

    @property
    def aa_minutes_median(self) -> float:
        return self.aa_rounds_median / self.design.rounds_per_block * self.block_s / 60.0

    def describe(self) -> str:
        d = self.design
        return (f"{d.max_blocks} block(s) of {d.rounds_per_block} rounds at most "
                f"({d.max_rounds} rounds, {self.minutes_max:.0f} min); a healthy A/B decides "
                f"in a median of {self.aa_rounds_median:.0f} rounds "
                f"({self.aa_minutes_median:.0f} min); miss at 1.5x a threshold "
                f"{self.miss:.1%}, healthy decided {self.aa_decided:.0%}; false fail at most "
                f"{FALSE_FAIL_GOAL:.0%} by construction (simulated: "
                f"{self.false_fail_at_threshold:.2%} at the thresholds)")


@dataclass(frozen=True)
class Layout:
    """How an A/B's rounds are laid out: blocks of rounds, and server pairs per block (1 with
    persistent servers; one per round with per_round servers)."""

    blocks: int
    rounds_per_block: int
    pairs_per_block: int = 1

    @property
    def rounds(self) -> int:
        return self.blocks * self.rounds_per_block


@dataclass(frozen=True)
class Drawn:
    """One check's simulated rounds (paths x rounds): the badness, and each build's log
    figure around its own level (the head's carries the offsets and the change)."""

    badness: np.ndarray
    base: np.ndarray
    head: np.ndarray


def draw(rng: np.random.Generator, spread: Spread, *, change: float, paths: int,
         layout: Layout) -> Drawn:
    """Rounds of one check: `change` (log, on the bad side) plus the two noise terms. With
    several server pairs per block (a fresh pair every round), each round has its own offset."""
    offsets = rng.normal(0.0, spread.between, (paths, layout.blocks * layout.pairs_per_block))
    per_round = np.repeat(offsets, layout.rounds // offsets.shape[1], axis=1)
    side = spread.within / math.sqrt(2.0)
    base = rng.normal(0.0, side, (paths, layout.rounds))
    head = rng.normal(0.0, side, (paths, layout.rounds))
    badness = change + per_round + head - base
    return Drawn(badness, base, base + badness)


@dataclass(frozen=True)
class Runs:
    """Decisions of every check's paths: code (checks x paths) and the round of decision."""

    code: np.ndarray
    at: np.ndarray


@dataclass(frozen=True)
class Trials:
    """How many simulated A/Bs, from which seed, with how many server pairs per block."""

    paths: int
    seed: int
    pairs_per_block: int = 1


def simulate(specs: Sequence[seq.CheckSpec], spreads: Sequence[Spread], *,
             changes: Sequence[float], design: seq.Design, trials: Trials) -> Runs:
    """Every check's decisions over `trials.paths` simulated A/Bs at these changes."""
    rng = np.random.default_rng(trials.seed)
    layout = Layout(design.max_blocks, design.rounds_per_block, trials.pairs_per_block)
    codes, ats = [], []
    drawn = [draw(rng, spread, change=change, paths=trials.paths, layout=layout)
             for spread, change in zip(spreads, changes, strict=True)]
    runner = seq.runner_gauge([d.badness for d in drawn], [s.prior for s in specs], design)
    for spec, one in zip(specs, drawn, strict=True):
        p = seq.run_paths(one.badness, spec, design=design, base=one.base, runner=runner)
        codes.append(p.code)
        ats.append(np.where(p.at > 0, p.at, design.max_rounds + 1))
    return Runs(np.array(codes), np.array(ats))


def verdicts(runs: Runs, max_rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """Per path: the verdict (1 fail, -1 pass, 0 inconclusive) with the test truncated at
    `max_rounds`, and the rounds it used."""
    in_time = runs.at <= max_rounds
    fails = (runs.code == 1) & in_time
    first_fail = np.where(fails, runs.at, max_rounds + 1).min(axis=0)
    all_pass = ((runs.code == -1) & in_time).all(axis=0)
    failed = fails.any(axis=0)
    verdict = np.where(failed, 1, np.where(all_pass, -1, 0))
    used = np.where(failed, first_fail, np.where(all_pass, runs.at.max(axis=0), max_rounds))
    return verdict, used


def size(specs: Sequence[seq.CheckSpec], spreads: Sequence[Spread], rounds_per_block: int,
         cost: RunnerCost, *, paths: int = PATHS, max_blocks: int = MAX_BLOCKS) -> Sizing:
    """The shortest design (blocks) that meets the goals at this noise, or the longest one
    considered, marked unreachable (seeded: the same noise sizes the same design)."""
    if not specs:
        raise ValueError("nothing to size: no judged check")
    pairs = rounds_per_block if cost.per_round_servers else 1
    full = seq.Design(rounds_per_block, max_blocks, len(specs),
                      per_round_servers=cost.per_round_servers)
    zero = simulate(specs, spreads, changes=[0.0] * len(specs), design=full,
                    trials=Trials(paths, SEED, pairs))
    at_threshold = simulate(specs, spreads, changes=[s.zone.theta0 for s in specs], design=full,
                            trials=Trials(paths, SEED - 1, pairs))
    at_theta1 = [
        simulate([spec], [spread], changes=[spec.zone.theta1], design=full,
                 trials=Trials(paths, SEED + 1 + k, pairs))
        for k, (spec, spread) in enumerate(zip(specs, spreads, strict=True))]
    curve = [_rates(zero, at_threshold, at_theta1=at_theta1,
                    design=replace(full, max_blocks=b), cost=cost)
             for b in range(1, max_blocks + 1)]
    decided_by = tuple(c.aa_decided for c in curve)
    chosen = next((c for c in curve if c.reachable), curve[-1])
    return replace(chosen, aa_decided_by=decided_by)


def _rates(zero: Runs, at_threshold: Runs, *, at_theta1: list[Runs], design: seq.Design,
           cost: RunnerCost) -> Sizing:
    rounds = design.max_rounds
    verdict, used = verdicts(zero, rounds)
    misses, regression_rounds = [], []
    for runs in at_theta1:
        v, u = verdicts(runs, rounds)
        misses.append(float(np.mean(v != 1)))
        regression_rounds.append(float(np.median(u)))
    false_fail, decided = float(np.mean(verdict == 1)), float(np.mean(verdict == -1))
    miss = max(misses)
    passed = np.mean((zero.code == -1) & (zero.at <= rounds), axis=1)
    return Sizing(
        design=design,
        reachable=miss <= MISS_GOAL and decided >= AA_DECIDED_GOAL,
        false_fail=false_fail, miss=miss, aa_decided=decided,
        aa_rounds_median=float(np.median(used)),
        regression_rounds_median=max(regression_rounds),
        block_s=cost.block_s(design.rounds_per_block),
        misses=tuple(misses), passed=tuple(float(x) for x in passed),
        false_fail_at_threshold=float(np.mean(verdicts(at_threshold, rounds)[0] == 1)))
