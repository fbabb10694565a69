"""The statistics of judging: the sequential test of `gate ab` and the small-sample intervals
of baseline mode and the guided/free bound (docs/compare.md, "The sequential test").

A/B. Each round r gives, per check, the paired log ratio d_r = log(head_r / base_r) of two
cells measured next to each other; on the check's bad side (the drop of a throughput, the rise
of a latency) it is the badness. Rounds come in blocks of B rounds on one pair of servers, and
the unit of the test is the block mean: it carries its server pair's offset once, so the
spread between server pairs is in every look (per_round servers: every round is its own pair,
and the unit is the round). Per check, with the threshold as stated (a 10% throughput
threshold is a 10% drop) and 1.5x it:

    theta0 = the threshold's badness: log(1 + t) for a rise, -log(1 - t) for a drop
    theta1 = the same at 1.5 t

At every whole block from the second on, a one-sided Student t test of the units so far
against each end: fail when the mean is past theta0 (H0: badness <= theta0, rejected), pass
when it is below theta1 (H1: badness >= theta1, rejected). The variance is the run's own spread
of its units, pooled with a calibration's (a prior worth its degrees of freedom, scaled up when
this run's rounds spread more than the calibration's) when one applies; without one the run
learns its noise from its own blocks. The t distribution carries the uncertainty of that
estimate, so no upper bound is put on it.

Error rates hold by construction, whatever the runner's noise. At the fail end the statistic's
law does not depend on the noise (scale-free), so the level at each look comes from one
simulation of standard normal units (`look_levels`): the per-look level is g x w_J, with the
weights w_J flat over the first looks and falling as 1/J^2 after them, and g chosen so that a
change AT the threshold crosses at some look within LOOK_HORIZON looks with probability
alpha / K (K: the verdict's mean checks; Bonferroni over them). A change below the threshold
crosses less often. The pass end is the same at 1.5x the threshold with beta. So a verdict
fails with at most ALPHA (family-wise) at any change up to the thresholds, and a check passes
with at most BETA at 1.5x its threshold; how often a change of 1.5x the threshold ends
undecided within the design depends on the noise, and is what a calibration sizes
(gate.judge.sizing).

The first block has one more look, for gross effects only: a check fails there when every
round of the block is past its threshold by a further GROSS_MARGIN (a 10% latency threshold:
every round 1.65x the base). It is not part of the budget above: it rests on the rounds of one
server pair of one build never lying that far apart in both rounds of a block (docs/compare.md,
"The first block").

A head whose rounds spread more than its base's is judged on that, by a spread check per
check: an F test of the head's round-to-round spread against the base's (within blocks, every
whole block so far), failing when the head's is past (1 + spread threshold) times the base's.
It is judged once, at the look the test stops on (every check decided, or the design's end),
at its share of the budget (SPREAD_SHARE of ALPHA over the checks); it never holds the test
open. The mean checks get the rest but GROSS_SHARE, which is left to the first block's look.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

# scipy.special, not scipy.stats: the same t, chi-square and F functions at a fifth of the
# import time, which every `gate` command pays (gate/cli imports the judge).
from scipy import special

from gate.judge.checks import HIGHER, LOWER, Direction
from gate.judge.levels import FIRST_LOOK, LOOK_HORIZON, look_levels
from gate.judge.verdict import Outcome

__all__ = ["FIRST_LOOK", "LOOK_HORIZON"]  # re-exported: the design's limits

# Per verdict: a fail at any change up to the thresholds, over all its checks and looks.
ALPHA = 0.01
# Shares of ALPHA: the spread checks', and what the first block's look for gross effects is
# left (simulated at the kept calibrations' noise, not bounded by construction); the mean
# checks get the rest (0.8 of it).
SPREAD_SHARE = 0.15
GROSS_SHARE = 0.05
# Per check: a pass at a change of 1.5x its threshold, over all looks.
BETA = 0.05
# The first block's look for gross effects: every round past the threshold by at least this
# much more (log 1.5: a further 1.5x).
GROSS_MARGIN = math.log(1.5)
# The two-sided interval shown with each check (the decision is the test's).
SHOWN_CONFIDENCE = 0.90
# One-sided level of the upper confidence bound a calibration's spread is sized at.
PRIOR_UCB = 0.90


class Interval(NamedTuple):
    """A relative change in percent: exp(mean d) - 1 and its interval's ends."""

    mean_pct: float
    lo_pct: float
    hi_pct: float


class LogSample(NamedTuple):
    """A side's figures on the log scale: mean of log values, their sd (None: unknown), count."""

    mean: float
    sd: float | None
    n: int


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """Student t quantile; cached because the tests ask for few distinct values."""
    return float(special.stdtrit(df, p))


@lru_cache(maxsize=4096)
def ucb_factor(df: float, level: float = PRIOR_UCB) -> float:
    """sd_hat * ucb_factor(df) is a one-sided `level` upper confidence bound of a normal sd
    estimated with `df` degrees of freedom (chi-square); infinite without any."""
    if df <= 0:
        return math.inf
    return math.sqrt(df / float(special.chdtri(df, level)))  # the chi2 quantile 1 - level


def _to_pct(x: float) -> float:
    return math.expm1(x) * 100.0


# ---------------------------------------------------------------- what a threshold means


class Zone(NamedTuple):
    """The test's two ends on the log badness: theta0 (the threshold) and theta1 (1.5x)."""

    theta0: float
    theta1: float


def badness_of(change_pct: float, direction: Direction) -> float:
    """A change stated in percent on the bad side (a drop of a throughput, a rise of a
    latency) as a log badness: 10% -> -log(0.9) for a throughput, log(1.1) for a latency."""
    if direction == HIGHER:
        if not change_pct < 100:
            raise ValueError(f"a drop of {change_pct:g}% leaves nothing to measure")
        return -math.log1p(-change_pct / 100.0)
    return math.log1p(change_pct / 100.0)


def zone_for(threshold_pct: float, direction: Direction = LOWER) -> Zone:
    """theta0 at the threshold as stated, theta1 at 1.5x it, in the check's own direction."""
    if not threshold_pct > 0:
        raise ValueError(f"a threshold must be > 0, got {threshold_pct!r}")
    return Zone(badness_of(threshold_pct, direction), badness_of(1.5 * threshold_pct, direction))


# ---------------------------------------------------------------- the parts of the test


class Prior(BaseModel):
    """What a calibration says about one check's noise, for one block design."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    block_sd: float = Field(gt=0, description="sd of one block's mean d (point estimate)")
    block_df: float = Field(ge=1, description="degrees of freedom of block_sd")
    within_sd: float | None = Field(None, gt=0, description="sd of d around its block's mean")
    within_df: float = Field(0, ge=0)
    side_within_sd: float | None = Field(
        None, gt=0, description="sd of one build's log figure around its block's mean (one "
        "server, round to round): the runner's noise, which the head cannot move")
    side_within_df: float = Field(0, ge=0)
    source: str = ""

    @property
    def df(self) -> int:
        """The degrees of freedom the test gives it (whole: the levels are per whole df)."""
        return int(self.block_df)


@dataclass(frozen=True)
class CheckSpec:
    """One judged check: what is bad, how far, and its calibration (None: none applies)."""

    name: str
    threshold_pct: float
    direction: Direction
    prior: Prior | None = None

    @property
    def zone(self) -> Zone:
        return zone_for(self.threshold_pct, self.direction)


@dataclass(frozen=True)
class Design:
    """Fixed before the first round: changing any of these after looking voids the error rates.
    `family_size` is the verdict's mean checks (the budget is split over them)."""

    rounds_per_block: int
    max_blocks: int
    family_size: int = 1
    per_round_servers: bool = False
    alpha: float = ALPHA
    beta: float = BETA

    def __post_init__(self) -> None:
        if self.rounds_per_block < 1 or self.max_blocks < 1 or self.family_size < 1:
            raise ValueError("rounds_per_block, max_blocks and family_size must be >= 1")
        if self.max_blocks > LOOK_HORIZON:
            raise ValueError(f"a design holds at most {LOOK_HORIZON} blocks (its levels' horizon)")
        if not (0 < self.alpha < 0.5 and 0 < self.beta < 0.5):
            raise ValueError("error rates must be between 0 and 0.5")

    @property
    def max_rounds(self) -> int:
        return self.rounds_per_block * self.max_blocks

    @property
    def units_per_block(self) -> int:
        """The test's units in a block: its mean (persistent), or each round (per_round)."""
        return self.rounds_per_block if self.per_round_servers else 1

    @property
    def mean_alpha(self) -> float:
        """One mean check's false-fail budget at its threshold, over every look."""
        return self.alpha * (1.0 - SPREAD_SHARE - GROSS_SHARE) / self.family_size

    @property
    def spread_alpha(self) -> float:
        """One spread check's false-fail budget, over every look."""
        return self.alpha * SPREAD_SHARE / self.family_size


def _levels(design: Design, prior_df: int, error: float) -> np.ndarray:
    """The level of each look: a one-look design (one block: results not measured by gate ab)
    is a plain one-sided t test at the whole `error`; otherwise the table's (gate.judge.levels)."""
    if design.max_blocks == 1:
        return np.array([error])
    return look_levels(prior_df, design.units_per_block, error)


@dataclass(frozen=True)
class CheckResult:
    """A check after replaying every look its rounds allow."""

    spec: CheckSpec
    outcome: Outcome
    rounds: int  # rounds behind the last look
    blocks: int
    decided_at_round: int | None
    interval: Interval | None  # on the d scale, at SHOWN_CONFIDENCE; None: no spread yet
    t_fail: float | None  # the t statistics of the last look, against theta0 and theta1
    t_pass: float | None
    df: float
    scaled: float  # the factor the calibration's spread was scaled by (1: as calibrated)
    gross: bool  # decided by the first block's look for gross effects
    block_range: Interval | None = None  # the first block: its rounds' smallest and largest d


@dataclass(frozen=True)
class SpreadResult:
    """A spread check: the head's round-to-round spread against the base's."""

    name: str
    threshold_pct: float
    outcome: Outcome
    ratio: float | None  # head's sd over base's
    interval: tuple[float, float] | None  # its 90% interval
    df: int
    decided_at_round: int | None


# ---------------------------------------------------------------- the replay, vectorized


@dataclass(kw_only=True)
class _Paths:
    """The state of P replays at once (the simulation runs thousands, a verdict one)."""

    code: np.ndarray  # 1 fail, -1 pass, 0 undecided
    at: np.ndarray  # round of the decision (0: none)
    center: np.ndarray  # badness of the last look
    var: np.ndarray  # variance of the center at the last look
    df: np.ndarray
    t_fail: np.ndarray
    t_pass: np.ndarray
    scaled: np.ndarray
    gross: np.ndarray
    blocks: np.ndarray  # blocks behind the last look

    @classmethod
    def empty(cls, n: int) -> _Paths:
        f = lambda v: np.full(n, v, dtype=float)  # noqa: E731
        return cls(code=np.zeros(n, np.int8), at=np.zeros(n, int), center=f(math.nan),
                   var=f(math.inf), df=f(0.0), t_fail=f(math.nan), t_pass=f(math.nan),
                   scaled=f(1.0), gross=np.zeros(n, bool), blocks=np.zeros(n, int))


def run_paths(badness: np.ndarray, spec: CheckSpec, *, design: Design,
              base: np.ndarray | None = None, runner: np.ndarray | None = None) -> _Paths:
    """Replay the test on each row of `badness` (paths x rounds, whole blocks in order);
    `base`: the base build's log figures of the same rounds (the runner's own noise, for the
    calibration's scale); `runner`: runner_gauge of the verdict's checks (paths x blocks)."""
    b = np.atleast_2d(np.asarray(badness, dtype=float))
    paths = _Paths.empty(b.shape[0])
    size = design.rounds_per_block
    blocks = min(b.shape[1] // size, design.max_blocks)
    if blocks < 1:
        return paths
    _gross_look(b[:, :size], spec, paths)
    sums = _Sums.of(b[:, : blocks * size], None if base is None else
                    np.atleast_2d(base)[:, : blocks * size], design=design,
                    runner=None if runner is None else np.atleast_2d(runner))
    levels = None
    if blocks >= FIRST_LOOK or design.max_blocks == 1:
        df = spec.prior.df if spec.prior is not None else 0
        levels = (_levels(design, df, design.mean_alpha), _levels(design, df, design.beta))
    for j in range(1, blocks + 1):
        if not (paths.code == 0).any():
            break
        _look(sums, j, spec=spec, design=design, paths=paths,
              levels=None if levels is None else (levels[0][j - 1], levels[1][j - 1]))
    return paths


def runner_gauge(rounds: Sequence[np.ndarray], priors: Sequence[Prior | None], design: Design
                 ) -> np.ndarray | None:
    """How much more this run's rounds spread within their blocks than the calibrations say,
    pooled over the verdict's checks (paths x blocks: at the end of each block; 1 where one
    shared noise explains it, see `conflict`): a runner noisier than its calibration is
    noisier in every check, and the pool of all of them says so sooner than any one check's
    few rounds. `rounds`: each check's paired log ratios
    (paths x rounds, whole blocks). None: no check has a calibrated round spread, or
    per_round servers (every round its own pair: no rounds within one)."""
    size = design.rounds_per_block
    if design.per_round_servers or size < 2:
        return None
    terms, calibration_df = [], 0.0
    for x, prior in zip(rounds, priors, strict=True):
        x = np.atleast_2d(np.asarray(x, float))
        blocks = x.shape[1] // size
        if prior is None or not prior.within_sd or prior.within_df <= 0 or blocks < 1:
            continue
        cut = x[:, : blocks * size].reshape(x.shape[0], blocks, size)
        ss = ((cut - cut.mean(axis=2, keepdims=True)) ** 2).sum(axis=2)
        terms.append(np.cumsum(ss, axis=1) / prior.within_sd**2)
        calibration_df += prior.within_df
    if not terms:
        return None
    looks = min(t.shape[1] for t in terms)
    total = np.sum([t[:, :looks] for t in terms], axis=0)
    df = len(terms) * (size - 1) * np.arange(1, looks + 1)
    return np.column_stack([conflict(total[:, j] / df[j], float(df[j]), calibration_df)
                            for j in range(looks)])


def gross_margin(zone: Zone) -> float:
    """The badness every round of the first block must reach to fail there: the threshold
    and a further 1.5x (a 10% latency threshold: 1.65x; a 10% throughput threshold: -40%)."""
    return zone.theta0 + GROSS_MARGIN


def _gross_look(first: np.ndarray, spec: CheckSpec, paths: _Paths) -> None:
    paths.center[:], paths.blocks[:] = first.mean(axis=1), 1
    fail = first.min(axis=1) >= gross_margin(spec.zone)
    paths.code[fail], paths.at[fail], paths.gross[fail] = 1, first.shape[1], True


def _within(x: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """Sum of squares of x around its blocks' means, and its degrees of freedom."""
    blocks = x.reshape(x.shape[0], -1, size)
    ss = ((blocks - blocks.mean(axis=2, keepdims=True)) ** 2).sum(axis=(1, 2))
    return ss, blocks.shape[1] * (size - 1)


@dataclass(frozen=True, kw_only=True)
class _Sums:
    """Running sums per whole block (paths x blocks): of the test's units and their squares,
    of the rounds' squares within their blocks (paired, and the base build's own)."""

    units: np.ndarray  # units so far at the end of each block
    total: np.ndarray
    squares: np.ndarray
    within: np.ndarray
    base_within: np.ndarray | None
    runner: np.ndarray | None = None

    @classmethod
    def of(cls, b: np.ndarray, base: np.ndarray | None, *, design: Design,
           runner: np.ndarray | None = None) -> _Sums:
        size = design.rounds_per_block
        blocks = b.reshape(b.shape[0], -1, size)
        means = blocks.mean(axis=2)
        units = blocks if design.per_round_servers else means[:, :, None]
        within = np.cumsum(((blocks - means[:, :, None]) ** 2).sum(axis=2), axis=1)
        base_within = None
        if base is not None:
            sides = base.reshape(base.shape[0], -1, size)
            base_within = np.cumsum(
                ((sides - sides.mean(axis=2, keepdims=True)) ** 2).sum(axis=2), axis=1)
        per_block = units.shape[2]
        return cls(units=per_block * np.arange(1, blocks.shape[1] + 1),
                   total=np.cumsum(units.sum(axis=2), axis=1),
                   squares=np.cumsum((units**2).sum(axis=2), axis=1), within=within,
                   base_within=base_within, runner=runner)


# A run's spread scales its calibration's only past this quantile of the spread ratio's law
# when run and calibration share one noise (an F test at 1 - CONFLICT_LEVEL): a calibration
# that matches this runner keeps its weight, one this runner's rounds contradict is scaled.
CONFLICT_LEVEL = 0.90


def conflict(ratio: np.ndarray, df_run: float, df_calibration: float) -> np.ndarray:
    """The scale a run's spread ratio to its calibration's puts on the calibration: the ratio
    itself when it is past what one shared noise explains (CONFLICT_LEVEL), else 1."""
    if df_run <= 0 or df_calibration <= 0:
        return np.ones_like(ratio)
    bound = float(special.fdtri(df_run, df_calibration, CONFLICT_LEVEL))
    return np.where(ratio > bound, ratio, 1.0)


def _scale(sums: _Sums, j: int, *, own_ss: np.ndarray, prior: Prior, design: Design
           ) -> np.ndarray:
    """How much more this run spreads than its calibration says (1: no more than one shared
    noise explains), by the largest of: the verdict's checks' rounds within blocks, pooled
    (`runner_gauge`); this check's units' own spread against the calibration's spread of a
    unit; and this check's rounds within blocks (the base build's own rounds against the
    calibration's one-build spread when both are known: a noise the head cannot move; else
    the paired rounds'). The calibration's spread is scaled by it, so a runner noisier than
    its calibration (another VM behind the same key, a neighbour that woke up) makes the test
    slower, never bolder."""
    n = sums.units[j - 1]
    out = np.ones(own_ss.shape[0])
    if sums.runner is not None and sums.runner.shape[1] >= j:
        out = np.maximum(out, sums.runner[:, j - 1])
    if n >= 2:
        ratio = own_ss / (n - 1) / (prior.block_sd**2 * design.units_per_block)
        out = np.maximum(out, conflict(ratio, n - 1, prior.df))
    size = design.rounds_per_block
    if design.per_round_servers or size < 2:
        return out  # rounds are units (per_round), or there is no round within a block
    df = j * (size - 1)
    if sums.base_within is not None and prior.side_within_sd and prior.side_within_df > 0:
        ratio = sums.base_within[:, j - 1] / df / prior.side_within_sd**2
        return np.maximum(out, conflict(ratio, df, prior.side_within_df))
    if prior.within_sd and prior.within_df > 0:
        ratio = sums.within[:, j - 1] / df / prior.within_sd**2
        return np.maximum(out, conflict(ratio, df, prior.within_df))
    return out


def _look(sums: _Sums, j: int, *, spec: CheckSpec, design: Design, paths: _Paths,
          levels: tuple[float, float] | None) -> None:
    n = int(sums.units[j - 1])
    center = sums.total[:, j - 1] / n
    ss = np.maximum(sums.squares[:, j - 1] - n * center**2, 0.0)
    prior = spec.prior
    scaled = np.ones(center.shape[0])
    if prior is not None:
        scaled = _scale(sums, j, own_ss=ss, prior=prior, design=design)
        unit_var = prior.block_sd**2 * design.units_per_block
        df = prior.df + n - 1.0
        s2 = (prior.df * scaled * unit_var + ss) / df
    else:
        df = n - 1.0
        s2 = ss / df if df > 0 else np.full(center.shape[0], math.inf)
    var = s2 / n
    open_ = paths.code == 0
    zone = spec.zone
    with np.errstate(divide="ignore", invalid="ignore"):
        t_fail = (center - zone.theta0) / np.sqrt(var)
        t_pass = (center - zone.theta1) / np.sqrt(var)
    for name, value in (("center", center), ("var", var), ("t_fail", t_fail),
                        ("t_pass", t_pass), ("scaled", scaled)):
        getattr(paths, name)[open_] = value[open_]
    paths.df[open_], paths.blocks[open_] = df, j
    if levels is None or df <= 0:
        return
    ok = open_ & np.isfinite(var) & (var > 0)
    fail = ok & (special.stdtr(df, -t_fail) < levels[0])
    passed = ok & ~fail & (special.stdtr(df, t_pass) < levels[1])
    paths.code[fail], paths.code[passed] = 1, -1
    paths.at[fail | passed] = j * design.rounds_per_block


def spread_paths(head: np.ndarray, base: np.ndarray, threshold_pct: float, design: Design,
                 stop_rounds: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per path: the spread check's outcome (1 fail, -1 pass) at the look the test stopped on
    (`stop_rounds` per path; default: every whole block of the rows) and the F ratio there.
    `head` and `base`: log figures, paths x rounds."""
    h, s = np.atleast_2d(np.asarray(head, float)), np.atleast_2d(np.asarray(base, float))
    size = design.rounds_per_block
    whole = min(h.shape[1] // size, design.max_blocks) * size
    stop = np.full(h.shape[0], whole) if stop_rounds is None else \
        np.minimum(np.asarray(stop_rounds) // size * size, whole)
    code = np.full(h.shape[0], -1, np.int8)
    ratio = np.full(h.shape[0], math.nan)
    bound = (1.0 + threshold_pct / 100.0) ** 2
    for rounds in np.unique(stop):
        if rounds < 2:
            continue  # no spread in fewer than two rounds
        at = stop == rounds
        (hs, df), (bs, _) = _side_spread(h[at, :rounds], design), \
            _side_spread(s[at, :rounds], design)
        if df < 1:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            f = hs / bs
        ratio[at] = f
        crossed = np.isfinite(f) & (special.fdtrc(df, df, f / bound) < design.spread_alpha)
        code[np.flatnonzero(at)[crossed]] = 1
    return code, ratio


def _side_spread(x: np.ndarray, design: Design) -> tuple[np.ndarray, int]:
    """One build's round-to-round sum of squares (around its blocks' means; per_round:
    around its mean) and its degrees of freedom."""
    if design.per_round_servers:
        ss = ((x - x.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
        return ss, x.shape[1] - 1
    return _within(x, design.rounds_per_block)


# ---------------------------------------------------------------- one check's replay


@dataclass(frozen=True)
class RoundPair:
    """One round's figures of both builds (positive)."""

    round: int  # 0-based round index
    base: float
    head: float


def whole_blocks(pairs: Sequence[RoundPair], rounds_per_block: int) -> list[list[RoundPair]]:
    """The rounds grouped by block (round // rounds_per_block), in order, keeping only whole
    blocks: a round missing on either side takes its block out rather than shifting every
    later round into the wrong server pair."""
    blocks: dict[int, list[RoundPair]] = {}
    for p in sorted(pairs, key=lambda p: p.round):
        blocks.setdefault(p.round // rounds_per_block, []).append(p)
    return [b for _, b in sorted(blocks.items()) if len(b) == rounds_per_block]


def _logs(pairs: Sequence[RoundPair], name: str) -> tuple[np.ndarray, np.ndarray]:
    base = np.array([p.base for p in pairs], float)
    head = np.array([p.head for p in pairs], float)
    if not (np.all(base > 0) and np.all(head > 0) and np.all(np.isfinite(base * head))):
        raise ValueError(f"{name}: figures must be positive and finite")
    return np.log(base), np.log(head)


def paired_logs(name: str, pairs: Sequence[RoundPair], design: Design
                ) -> tuple[list[RoundPair], np.ndarray, np.ndarray]:
    """The rounds of whole blocks, and their base and head log figures."""
    kept = [p for block in whole_blocks(pairs, design.rounds_per_block) for p in block]
    base, head = _logs(kept, name)
    return kept, base, head


def replay(spec: CheckSpec, pairs: Sequence[RoundPair], design: Design,
           runner: np.ndarray | None = None) -> CheckResult:
    """The check after every look its rounds (by round index, whole blocks only) allow;
    `runner`: runner_gauge of the verdict's checks (1 x blocks), if known."""
    kept, base, head = paired_logs(spec.name, pairs, design)
    d = head - base
    sign = 1.0 if spec.direction == LOWER else -1.0
    p = run_paths((sign * d)[None, :], spec, design=design, base=base[None, :], runner=runner)
    code, at = int(p.code[0]), int(p.at[0])
    outcome = {1: Outcome.FAIL, -1: Outcome.PASS}.get(code, Outcome.INCONCLUSIVE)
    blocks = int(p.blocks[0]) if d.size else 0
    size = design.rounds_per_block
    first = d[:size]
    return CheckResult(
        spec=spec, outcome=outcome, rounds=blocks * size, blocks=blocks,
        decided_at_round=kept[at - 1].round + 1 if at else None,
        interval=_shown(float(p.center[0]), float(p.var[0]), float(p.df[0]), sign)
        if d.size else None,
        t_fail=_finite(p.t_fail[0]), t_pass=_finite(p.t_pass[0]), df=float(p.df[0]),
        scaled=float(p.scaled[0]), gross=bool(p.gross[0]),
        block_range=Interval(_to_pct(float(first.mean())), _to_pct(float(first.min())),
                             _to_pct(float(first.max()))) if first.size == size else None)


def replay_spread(name: str, threshold_pct: float, pairs: Sequence[RoundPair], design: Design
                  ) -> SpreadResult:
    """The spread check of one check's rounds, on every whole block (the test's last look)."""
    kept = [p for block in whole_blocks(pairs, design.rounds_per_block) for p in block]
    kept = kept[: design.max_blocks * design.rounds_per_block]
    base, head = _logs(kept, name)
    code, ratio = spread_paths(head[None, :], base[None, :], threshold_pct, design)
    _, df = _side_spread(head[None, :], design) if head.size >= 2 else (None, 0)
    r = float(ratio[0])
    interval = None
    if df >= 1 and math.isfinite(r) and r > 0:
        lo, hi = (float(special.fdtri(df, df, q)) for q in (0.95, 0.05))
        interval = (math.sqrt(r / lo), math.sqrt(r / hi))
    failed = code[0] == 1
    return SpreadResult(
        name=name, threshold_pct=threshold_pct, outcome=Outcome.FAIL if failed else Outcome.PASS,
        ratio=math.sqrt(r) if math.isfinite(r) and r >= 0 else None, interval=interval,
        df=int(df), decided_at_round=kept[-1].round + 1 if failed else None)


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _shown(center: float, var: float, df: float, sign: float) -> Interval | None:
    """The interval shown beside a decision, on the d scale: a t interval at the last look
    (naive: not adjusted for the test having stopped there)."""
    if df <= 0 or not math.isfinite(var):
        return None
    half = t_quantile(0.5 + SHOWN_CONFIDENCE / 2.0, df) * math.sqrt(var)
    lo, hi = center - half, center + half
    if sign < 0:
        center, lo, hi = -center, -hi, -lo
    return Interval(_to_pct(center), _to_pct(lo), _to_pct(hi))


# ---------------------------------------------------------------- intervals of the other modes


def pooled_variance(
    prior_sigma: float, prior_df: float, observed_var: float, observed_df: float
) -> tuple[float, float]:
    """(variance, degrees of freedom) of one measurement, pooling prior and observed spread.
    Zero degrees of freedom in all: (nan, 0)."""
    df = prior_df + observed_df
    if df <= 0:
        return math.nan, 0.0
    return (prior_df * prior_sigma**2 + observed_df * observed_var) / df, df


def log_interval(center: float, se: float, df: float, confidence: float) -> tuple[float, float]:
    """Two-sided t interval on the log scale; unbounded when nothing measures the spread."""
    if df <= 0 or not math.isfinite(se):
        return -math.inf, math.inf
    half = t_quantile(0.5 + confidence / 2.0, df) * se
    return center - half, center + half


def paired_log_interval(
    d_values: Sequence[float], prior_sigma: float, prior_df: float, confidence: float
) -> tuple[float, float, float]:
    """(mean, lo, hi) of the mean of log values, on the log scale: a t interval whose variance
    pools a prior spread (prior_df) with the values' own (n - 1 df)."""
    _check_prior(prior_sigma, prior_df)
    _check_confidence(confidence)
    d = np.asarray(d_values, dtype=float)
    if d.size == 0 or not np.all(np.isfinite(d)):
        raise ValueError("paired_interval needs at least one finite paired log ratio")
    n = d.size
    observed_var = float(d.var(ddof=1)) if n > 1 else 0.0
    var, df = pooled_variance(prior_sigma, prior_df, observed_var, n - 1)
    mean = float(d.mean())
    lo, hi = log_interval(mean, math.sqrt(var / n) if df > 0 else math.inf, df, confidence)
    return mean, lo, hi


def paired_interval(
    d_values: Sequence[float], prior_sigma: float, prior_df: float, confidence: float
) -> Interval:
    """paired_log_interval as a relative change in percent; with prior_df = 0 and one value
    the interval is unbounded (decides nothing)."""
    mean, lo, hi = paired_log_interval(d_values, prior_sigma, prior_df, confidence)
    return Interval(_to_pct(mean), _to_pct(lo), _to_pct(hi))


def log_sample(values: Sequence[float]) -> LogSample:
    """Per-repeat figures (all > 0) as a LogSample."""
    v = np.asarray(values, dtype=float)
    if v.size == 0 or not np.all((v > 0) & np.isfinite(v)):
        raise ValueError("a side needs at least one figure, all positive and finite")
    x = np.log(v)
    return LogSample(float(x.mean()), float(x.std(ddof=1)) if x.size > 1 else None, int(x.size))


def log_sample_from_moments(mean: float, std: float | None, n: int) -> LogSample:
    """A stored mean/std/n summary on the log scale (delta method: sd of log ~ std / mean)."""
    if mean <= 0 or n < 1:
        raise ValueError("a stored summary needs mean > 0 and n >= 1")
    sd = None if std is None or n < 2 else std / mean
    return LogSample(math.log(mean), sd, n)


def unpaired_interval(
    head: LogSample, base: LogSample, *, prior_sigma: float, prior_df: float, confidence: float
) -> Interval:
    """Baseline mode: head's repeats against a stored baseline, not paired in time.

    Pooled two-sample t interval of mean(log head) - mean(log base): the spread of ONE
    measurement pools the prior (`prior_sigma`, per measurement, not per pair) with each side's
    own spread (n - 1 degrees of freedom each, none for a side with one value or an unknown sd);
    the standard error is s * sqrt(1/n_head + 1/n_base)."""
    _check_prior(prior_sigma, prior_df)
    _check_confidence(confidence)
    observed_ss, observed_df = 0.0, 0.0
    for side in (head, base):
        if side.sd is not None and side.n > 1:
            observed_ss += (side.n - 1) * side.sd**2
            observed_df += side.n - 1
    var, df = pooled_variance(prior_sigma, prior_df, observed_ss / max(observed_df, 1), observed_df)
    center = head.mean - base.mean
    se = math.sqrt(var * (1.0 / head.n + 1.0 / base.n)) if df > 0 else math.inf
    lo, hi = log_interval(center, se, df, confidence)
    return Interval(_to_pct(center), _to_pct(lo), _to_pct(hi))


def bonferroni_confidence(confidence: float, family_size: int) -> float:
    """Each of `family_size` intervals at this level holds together with `confidence`."""
    _check_confidence(confidence)
    if family_size < 1:
        raise ValueError(f"family_size must be >= 1, got {family_size!r}")
    return 1.0 - (1.0 - confidence) / family_size


def decide(interval: Interval, threshold_pct: float, direction: Direction) -> Outcome:
    """Interval rule of baseline mode: fail when the whole interval is past the threshold in
    the bad direction, pass when its bad end is within it, inconclusive otherwise."""
    if direction == HIGHER:  # badness is the drop
        bad_lo, bad_hi = -interval.hi_pct, -interval.lo_pct
    else:
        bad_lo, bad_hi = interval.lo_pct, interval.hi_pct
    if bad_lo > threshold_pct:
        return Outcome.FAIL
    if bad_hi <= threshold_pct:
        return Outcome.PASS
    return Outcome.INCONCLUSIVE


def _check_prior(prior_sigma: float, prior_df: float) -> None:
    if not (prior_sigma >= 0 and math.isfinite(prior_sigma)):
        raise ValueError(f"prior_sigma must be a finite number >= 0, got {prior_sigma!r}")
    if not (prior_df >= 0 and math.isfinite(prior_df)):
        raise ValueError(f"prior_df must be a finite number >= 0, got {prior_df!r}")


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
