"""The statistics of judging: the sequential test of `gate ab` and the small-sample intervals
of baseline mode and the guided/free bound (docs/compare.md, "The sequential A/B test").

A/B. Each round r gives, per check, the paired log ratio d_r = log(head_r / base_r) of two
cells measured next to each other; on the check's "bad" side (the drop of a throughput, the
rise of a latency) it is the badness b_r. Rounds come in blocks of B rounds (ABBA order within
a block) measured on one pair of servers, and the unit of the test is the block: its mean
carries the server pair's offset once, so the spread between server pairs is in every
interval (`Prior.block_sd`). Per check, a truncated sequential probability ratio test (Wald;
fishtest's SPRT is the anchor) between

    H0: badness = theta0   and   H1: badness = theta1 = log(1 + 1.5 x threshold),
    theta0 = 2 log(1 + threshold) - theta1   (the threshold is the midpoint),

looks at every whole block: LLR_J = (theta1 - theta0) * J * (mean - midpoint) / s^2 over the J
block means so far, fail at LLR >= log((1 - beta) / alpha), pass at LLR <= log(beta / (1 -
alpha)), otherwise one more block, up to the design's maximum (then inconclusive). s^2 pools
the calibration's spread of a block mean with this run's own spread of block means and takes
the pool at its upper confidence bound for the degrees of freedom behind it. A run whose blocks or rounds
vary more than the calibration says (F test, on every round so far, at each look) sets the
calibration aside at that look: the check then rests on its own spread, at its upper confidence
bound, and says to recalibrate. Before the first
block ends there is one look, after round 1, that can only fail, and only a gross effect:
one round's interval (one server pair, the calibration's spread of a round) wholly past
theta1 at a tiny alpha.

Error rates of a design at a runner's noise (false fail at no change, miss at 1.5x the
threshold, rounds) come from simulating this very code (gate.judge.sizing,
benchmarks/noise_simulation.py).
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
from gate.judge.verdict import Outcome, worst

# Per check: fail error at theta0 and pass error at theta1 (Wald's boundaries). The verdict's
# error rates at no change and at 1.5x the threshold are far smaller: docs/compare.md.
ALPHA = 0.05
BETA = 0.05
# One-sided level of the upper confidence bound put on a calibration's spread.
PRIOR_UCB = 0.90
# F test "this run varies more than its calibration", split over its two parts.
NOISIER_ALPHA = 0.01
# The round-1 look for gross effects, split over the checks.
GROSS_ALPHA = 0.001
# The two-sided interval shown with each check (the decision is the SPRT's).
SHOWN_CONFIDENCE = 0.90


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


# ---------------------------------------------------------------- the A/B test's parts


class Zone(NamedTuple):
    """The SPRT's hypotheses on the log badness: theta0 (pass side) and theta1 (fail side)."""

    theta0: float
    theta1: float

    @property
    def midpoint(self) -> float:
        return (self.theta0 + self.theta1) / 2.0


def zone_for(threshold_pct: float) -> Zone:
    """theta1 at 1.5x the threshold, theta0 placed so that the threshold is the midpoint."""
    if not threshold_pct > 0:
        raise ValueError(f"a threshold must be > 0, got {threshold_pct!r}")
    theta1 = math.log1p(1.5 * threshold_pct / 100.0)
    return Zone(2.0 * math.log1p(threshold_pct / 100.0) - theta1, theta1)


class Prior(BaseModel):
    """What a calibration says about one check's noise, for one block design."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    block_sd: float = Field(gt=0, description="sd of one block's mean d (point estimate)")
    block_df: float = Field(ge=1, description="degrees of freedom of block_sd")
    within_sd: float | None = Field(None, gt=0, description="sd of d around its block's mean")
    within_df: float = Field(0, ge=0)
    round_sd: float = Field(gt=0, description="sd of one round's d on a fresh server pair")
    round_df: float = Field(ge=1)
    source: str = ""

    @property
    def block_ucb(self) -> float:
        return self.block_sd * ucb_factor(self.block_df)

    @property
    def round_ucb(self) -> float:
        return self.round_sd * ucb_factor(self.round_df)


@dataclass(frozen=True)
class CheckSpec:
    """One judged check: what is bad, how far, and its calibration (None: none applies)."""

    name: str
    threshold_pct: float
    direction: Direction
    prior: Prior | None = None


@dataclass(frozen=True)
class Design:
    """Fixed before the first round: changing any of these after looking voids the error rates."""

    rounds_per_block: int
    max_blocks: int
    family_size: int = 1
    alpha: float = ALPHA
    beta: float = BETA
    gross_alpha: float = GROSS_ALPHA

    def __post_init__(self) -> None:
        if self.rounds_per_block < 1 or self.max_blocks < 1 or self.family_size < 1:
            raise ValueError("rounds_per_block, max_blocks and family_size must be >= 1")
        if not (0 < self.alpha < 0.5 and 0 < self.beta < 0.5 and 0 < self.gross_alpha < 0.5):
            raise ValueError("error rates must be between 0 and 0.5")

    @property
    def max_rounds(self) -> int:
        return self.rounds_per_block * self.max_blocks

    @property
    def fail_llr(self) -> float:
        return math.log((1.0 - self.beta) / self.alpha)

    @property
    def pass_llr(self) -> float:
        return math.log(self.beta / (1.0 - self.alpha))


@dataclass(frozen=True)
class CheckResult:
    """A check after replaying every look its rounds allow."""

    spec: CheckSpec
    outcome: Outcome
    rounds: int  # rounds judged (complete blocks, or 1 for the gross look)
    blocks: int
    decided_at_round: int | None
    interval: Interval  # on the d scale, at SHOWN_CONFIDENCE, from the last look
    llr: float | None
    prior_set_aside: bool  # this run varied more than its calibration


# ---------------------------------------------------------------- the replay, vectorized


@dataclass
class _Paths:
    """The state of P replays at once (the simulation runs thousands, a verdict one)."""

    code: np.ndarray  # 1 fail, -1 pass, 0 undecided
    at: np.ndarray  # round of the decision (0: none)
    center: np.ndarray  # badness of the last look
    var: np.ndarray  # variance of one unit (a block mean, or a round) at the last look
    df: np.ndarray
    units: np.ndarray  # units behind the center
    llr: np.ndarray
    aside: np.ndarray
    rounds: np.ndarray

    @classmethod
    def empty(cls, n: int) -> _Paths:
        f = lambda v: np.full(n, v, dtype=float)  # noqa: E731
        return cls(np.zeros(n, np.int8), np.zeros(n, int), f(math.nan), f(math.inf), f(0.0),
                   np.ones(n, int), f(math.nan), np.zeros(n, bool), np.zeros(n, int))


def run_paths(badness: np.ndarray, spec: CheckSpec, design: Design) -> _Paths:
    """Replay the test on each row of `badness` (paths x rounds)."""
    b = np.atleast_2d(np.asarray(badness, dtype=float))
    paths = _Paths.empty(b.shape[0])
    if b.shape[1] >= 1:
        _gross_look(b[:, 0], spec, design, paths)
    blocks = min(b.shape[1] // design.rounds_per_block, design.max_blocks)
    for j in range(1, blocks + 1):
        if not (paths.code == 0).any():
            break
        _block_look(b[:, : j * design.rounds_per_block], spec, design, paths)
    return paths


def _gross_look(first: np.ndarray, spec: CheckSpec, design: Design, paths: _Paths) -> None:
    paths.center[:], paths.rounds[:] = first, 1
    if spec.prior is None or design.rounds_per_block < 2:
        return
    p = spec.prior
    paths.var[:], paths.df[:] = p.round_ucb**2, p.round_df
    q = t_quantile(1.0 - design.gross_alpha / design.family_size, p.round_df)
    fail = first - q * p.round_ucb > zone_for(spec.threshold_pct).theta1
    paths.code[fail], paths.at[fail] = 1, 1


def _block_look(b: np.ndarray, spec: CheckSpec, design: Design, paths: _Paths) -> None:
    size = design.rounds_per_block
    j = b.shape[1] // size
    blocks = b.reshape(b.shape[0], j, size)
    means = blocks.mean(axis=2)
    s2 = means.var(axis=1, ddof=1) if j > 1 else np.zeros(b.shape[0])
    within = ((blocks - means[:, :, None]) ** 2).sum(axis=(1, 2))
    if spec.prior is not None:
        # Judged afresh at every look on every round so far, not kept once seen: on a 2-core
        # runner one stalled cell in the first block (its F test has 1 df) would otherwise
        # leave a healthy check on its own spread, undecidable, for the rest of the A/B.
        open_ = paths.code == 0
        paths.aside[open_] = _noisier(s2, within, j, size, spec.prior)[open_]
    var, df = _pooled(s2, j, spec.prior, paths.aside)
    center = means.mean(axis=1)
    zone = zone_for(spec.threshold_pct)
    ok = np.isfinite(var) & (var > 0)
    llr = np.where(ok, (zone.theta1 - zone.theta0) * j * (center - zone.midpoint)
                   / np.where(ok, var, 1.0), math.nan)
    open_ = paths.code == 0
    for name, value in (("center", center), ("var", var), ("df", df), ("llr", llr)):
        getattr(paths, name)[open_] = value[open_]
    paths.units[open_], paths.rounds[open_] = j, j * size
    fail = open_ & ok & (llr >= design.fail_llr)
    passed = open_ & ok & (llr <= design.pass_llr)
    paths.code[fail], paths.code[passed] = 1, -1
    paths.at[fail | passed] = j * size


def _noisier(s2: np.ndarray, within_ss: np.ndarray, blocks: int, size: int, prior: Prior
             ) -> np.ndarray:
    """Per path: do this run's block means or rounds vary more than the calibration says?"""
    each = NOISIER_ALPHA / 2.0
    out = np.zeros(s2.shape, bool)
    if blocks > 1:
        out |= special.fdtrc(blocks - 1, prior.block_df, s2 / prior.block_sd**2) < each
    within_df = blocks * (size - 1)
    if within_df > 0 and prior.within_sd and prior.within_df > 0:
        ratio = within_ss / within_df / prior.within_sd**2
        out |= special.fdtrc(within_df, prior.within_df, ratio) < each
    return out


def _pooled(s2: np.ndarray, blocks: int, prior: Prior | None, aside: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """(variance of one block mean, its df) per path, at the upper confidence bound of its
    estimate: the calibration's spread pooled with the run's own, or (no calibration, or set
    aside) the run's own alone. The bound is taken after pooling, so a run's own spread that
    happens to come out small never makes the test bolder than its degrees of freedom allow."""
    n = s2.shape[0]
    own = np.full(n, math.inf)
    if blocks > 1:
        own = s2 * ucb_factor(blocks - 1) ** 2
    own_df = np.full(n, float(blocks - 1))
    if prior is None:
        return own, own_df
    df = prior.block_df + blocks - 1
    pooled = (prior.block_df * prior.block_sd**2 + (blocks - 1) * s2) / df * ucb_factor(df) ** 2
    return (np.where(aside, own, pooled), np.where(aside, own_df, np.full(n, df)))


def replay(spec: CheckSpec, d_rounds: Sequence[float], design: Design) -> CheckResult:
    """The check after every look its paired log ratios (one per round, in order) allow."""
    d = np.asarray(d_rounds, dtype=float)
    if d.size and not np.all(np.isfinite(d)):
        raise ValueError(f"{spec.name}: paired log ratios must be finite")
    sign = 1.0 if spec.direction == LOWER else -1.0
    p = run_paths((sign * d)[None, :], spec, design)
    code, at = int(p.code[0]), int(p.at[0])
    outcome = {1: Outcome.FAIL, -1: Outcome.PASS}.get(code, Outcome.INCONCLUSIVE)
    return CheckResult(
        spec=spec, outcome=outcome, rounds=int(p.rounds[0]) if d.size else 0,
        blocks=int(p.units[0]) if p.rounds[0] >= design.rounds_per_block else 0,
        decided_at_round=at or None,
        interval=_shown(float(p.center[0]), float(p.var[0]), float(p.df[0]),
                        int(p.units[0]), sign) if d.size else Interval(0.0, -100.0, math.inf),
        llr=None if math.isnan(p.llr[0]) else float(p.llr[0]), prior_set_aside=bool(p.aside[0]))


def _shown(center: float, var: float, df: float, units: int, sign: float) -> Interval:
    """The interval shown beside a decision, on the d scale."""
    if df <= 0 or not math.isfinite(var):
        lo, hi = -math.inf, math.inf
    else:
        half = t_quantile(0.5 + SHOWN_CONFIDENCE / 2.0, df) * math.sqrt(var / units)
        lo, hi = center - half, center + half
    if sign < 0:
        center, lo, hi = -center, -hi, -lo
    return Interval(_to_pct(center), _to_pct(lo), _to_pct(hi))


class Action(NamedTuple):
    stop: bool
    outcome: Outcome  # overall: final when stop, provisional otherwise
    reason: str


def next_action(results: Sequence[CheckResult], rounds: int, design: Design) -> Action:
    """Stop or measure another round, and why (the budget is the flow's to check)."""
    outcome = worst([r.outcome for r in results])
    undecided = [r.spec.name for r in results if r.outcome == Outcome.INCONCLUSIVE]
    if outcome == Outcome.FAIL:
        failed = ", ".join(r.spec.name for r in results if r.outcome == Outcome.FAIL)
        return Action(True, outcome, f"failed: {failed}")
    if not undecided:
        return Action(True, outcome, "every check decided")
    if rounds >= design.max_rounds:
        return Action(True, outcome, f"the design's {design.max_rounds} rounds are done; "
                      f"undecided: {', '.join(undecided)}")
    return Action(False, outcome, f"undecided: {', '.join(undecided)}")


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
    head: LogSample, base: LogSample, prior_sigma: float, prior_df: float, confidence: float
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
