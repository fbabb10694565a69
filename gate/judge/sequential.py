"""Small-sample intervals and the sequential stopping rule of `gate ab` (docs/compare.md,
"Paired rounds and sequential A/B").

Every figure is judged on the log scale: in A/B mode each round r gives, per check, the paired
value d_r = log(head_r / base_r) of two cells measured next to each other in time. The
interval of the mean of d is a Student t interval whose variance pools two sources:

- prior information: the spread `prior_sigma` of d measured by `gate calibrate` in A/A rounds
  on this hardware and plan (a noise profile), worth `prior_df` = pairs - 1 degrees of freedom,
  or a labelled fallback constant worth a few;
- the spread observed in this run's own rounds (n - 1 degrees of freedom).

    s^2 = (prior_df * prior_sigma^2 + (n - 1) * s_obs^2) / (prior_df + n - 1),
    mean(d) +- t(df = prior_df + n - 1) * s / sqrt(n)

This is the ordinary pooled-variance t interval: exact when d is normal and the profile's
spread is an independent estimate of the same variance, and defined from the first round.

Sequential rule: after each round (a "look") every undecided check is judged; a check's
reported interval is the intersection of its intervals so far. Each interval is taken at a
confidence spent from an overall alpha: alpha / K over the K checks (Bonferroni), and over the
planned maximum of L looks by a spending function f(t) = t**rho (rho = 1: alpha / L per look),
so that the chance that ANY interval of ANY check at ANY look misses its true value is at most
alpha (union bound, whatever the correlation between checks and looks). On that event no
decision is wrong, however early the run stops.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Literal, NamedTuple

import numpy as np

# scipy.special, not scipy.stats: the same t and F functions at a fifth of the import time,
# which every `gate` command pays (gate/cli imports the judge).
from scipy import special

from gate.judge.verdict import Outcome, worst

Direction = Literal["higher_is_better", "lower_is_better"]
HIGHER: Direction = "higher_is_better"
LOWER: Direction = "lower_is_better"

# Spending exponent: 1 spends alpha evenly over the looks (Bonferroni over looks); larger values
# keep alpha for the later looks (narrower late intervals, wider early ones). 2 spends 1/36 of
# alpha at the first of 6 looks: still enough to fail a 2x slowdown in round 1 at 10% noise per
# round, while the last looks, where passes are decided, get 11/36 (benchmarks/noise_simulation.py).
DEFAULT_SPENDING_RHO = 2.0


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


# ---------------------------------------------------------------- intervals


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """Student t quantile; cached because the sequential rule asks for few distinct values."""
    return float(special.stdtrit(df, p))


def pooled_variance(
    prior_sigma: float, prior_df: float, observed_var: float, observed_df: float
) -> tuple[float, float]:
    """(variance, degrees of freedom) of one measurement, pooling prior and observed spread.
    Zero degrees of freedom in all: (nan, 0)."""
    df = prior_df + observed_df
    if df <= 0:
        return math.nan, 0.0
    return (prior_df * prior_sigma**2 + observed_df * observed_var) / df, df


def _to_pct(x: float) -> float:
    return math.expm1(x) * 100.0


def log_interval(center: float, se: float, df: float, confidence: float) -> tuple[float, float]:
    """Two-sided t interval on the log scale; unbounded when nothing measures the spread."""
    if df <= 0 or not math.isfinite(se):
        return -math.inf, math.inf
    half = t_quantile(0.5 + confidence / 2.0, df) * se
    return center - half, center + half


def paired_log_interval(
    d_values: Sequence[float], prior_sigma: float, prior_df: float, confidence: float
) -> tuple[float, float, float]:
    """(mean, lo, hi) of the mean paired log ratio, on the log scale (see the module doc)."""
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
    """Interval of the relative change exp(mean d) - 1 in percent, d = log(head/base) per
    round. prior_sigma is the sd of one round's d (log scale), worth prior_df degrees of
    freedom; with prior_df = 0 and one round the interval is unbounded (decides nothing)."""
    mean, lo, hi = paired_log_interval(d_values, prior_sigma, prior_df, confidence)
    return Interval(_to_pct(mean), _to_pct(lo), _to_pct(hi))


def spread_exceeds_prior(
    d_values: Sequence[float], prior_sigma: float, prior_df: float, alpha: float = 0.01
) -> bool:
    """True when this run's rounds vary more than the prior says (one-sided F test at `alpha`
    of s_obs^2 / prior_sigma^2 on (n - 1, prior_df) degrees of freedom): the guarantee
    assumes the profile's spread, so the verdict should say to recalibrate."""
    d = np.asarray(d_values, dtype=float)
    if d.size < 2 or prior_df <= 0 or prior_sigma <= 0:
        return False
    ratio = float(d.var(ddof=1)) / prior_sigma**2
    return bool(special.fdtrc(d.size - 1, prior_df, ratio) < alpha)


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
    the standard error is s * sqrt(1/n_head + 1/n_base). Valid from one head repeat on when the
    prior has degrees of freedom."""
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


def _check_prior(prior_sigma: float, prior_df: float) -> None:
    if not (prior_sigma >= 0 and math.isfinite(prior_sigma)):
        raise ValueError(f"prior_sigma must be a finite number >= 0, got {prior_sigma!r}")
    if not (prior_df >= 0 and math.isfinite(prior_df)):
        raise ValueError(f"prior_df must be a finite number >= 0, got {prior_df!r}")


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")


# ---------------------------------------------------------------- spending and decisions


def look_alpha(look: int, max_looks: int, alpha: float, rho: float = DEFAULT_SPENDING_RHO) -> float:
    """The part of `alpha` spent at look `look` (1-based) of at most `max_looks`:
    f(look/L) - f((look-1)/L) with f(t) = alpha * t**rho. The parts add up to alpha."""
    if max_looks < 1 or not 1 <= look <= max_looks:
        raise ValueError(f"look {look} is outside 1..{max_looks}")
    if rho <= 0:
        raise ValueError(f"spending exponent rho must be > 0, got {rho!r}")
    return alpha * ((look / max_looks) ** rho - ((look - 1) / max_looks) ** rho)


def look_confidence(
    look: int, max_looks: int, family_size: int, confidence: float, rho: float = DEFAULT_SPENDING_RHO
) -> float:
    """Two-sided confidence of each check's interval at `look`, such that all intervals of all
    `family_size` checks at all looks hold together with probability >= `confidence`.
    With max_looks = 1 this is the fixed design's Bonferroni level 1 - (1 - confidence) / K."""
    _check_confidence(confidence)
    if family_size < 1:
        raise ValueError(f"family_size must be >= 1, got {family_size!r}")
    return 1.0 - look_alpha(look, max_looks, 1.0 - confidence, rho) / family_size


def decide(interval: Interval, threshold_pct: float, direction: Direction) -> Outcome:
    """fail: the whole interval is past the threshold in the bad direction; pass: its bad end is
    within it; inconclusive: it straddles the threshold."""
    if direction == HIGHER:  # badness is the drop
        bad_lo, bad_hi = -interval.hi_pct, -interval.lo_pct
    else:
        bad_lo, bad_hi = interval.lo_pct, interval.hi_pct
    if bad_lo > threshold_pct:
        return Outcome.FAIL
    if bad_hi <= threshold_pct:
        return Outcome.PASS
    return Outcome.INCONCLUSIVE


# ---------------------------------------------------------------- the sequential state


@dataclass(frozen=True)
class SequentialDesign:
    """Fixed before the first round: changing any of these after looking voids the guarantee."""

    max_looks: int
    family_size: int
    confidence: float = 0.95
    rho: float = DEFAULT_SPENDING_RHO
    stop_on_fail: bool = True  # a failed check settles the verdict (fail is worse than inconclusive)

    def __post_init__(self) -> None:
        if self.max_looks < 1 or self.family_size < 1:
            raise ValueError("max_looks and family_size must be >= 1")
        _check_confidence(self.confidence)

    def confidence_at(self, look: int) -> float:
        return look_confidence(look, self.max_looks, self.family_size, self.confidence, self.rho)


@dataclass(frozen=True)
class CheckSpec:
    """One judged check: what is bad, how far, and the prior spread of one round's d."""

    name: str
    threshold_pct: float
    direction: Direction
    prior_sigma: float
    prior_df: float
    prior_source: str = ""


@dataclass(frozen=True)
class CheckState:
    spec: CheckSpec
    outcome: Outcome = Outcome.INCONCLUSIVE
    n: int = 0
    mean_log: float = math.nan
    lo_log: float = -math.inf  # running intersection of the intervals so far
    hi_log: float = math.inf
    decided_at: int | None = None  # look at which the outcome was settled
    disjoint: bool = False  # an interval missed the earlier ones: noise beyond the prior

    @property
    def interval(self) -> Interval:
        return Interval(_to_pct(self.mean_log), _to_pct(self.lo_log), _to_pct(self.hi_log))


@dataclass(frozen=True)
class SequentialState:
    design: SequentialDesign
    checks: dict[str, CheckState]
    looks: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)


class Action(NamedTuple):
    stop: bool
    outcome: Outcome  # overall: final when stop, provisional otherwise
    reason: str


def start(design: SequentialDesign, specs: Sequence[CheckSpec]) -> SequentialState:
    if len(specs) > design.family_size:
        raise ValueError(f"{len(specs)} checks but the design's family has {design.family_size}")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError("check names must be unique")
    return SequentialState(design, {s.name: CheckState(s) for s in specs})


def _judge_check(cs: CheckState, d_values: Sequence[float], look: int, conf: float) -> CheckState:
    if cs.outcome != Outcome.INCONCLUSIVE or not len(d_values):
        return cs  # decided checks stay decided; a check with no data yet waits
    s = cs.spec
    mean, lo, hi = paired_log_interval(d_values, s.prior_sigma, s.prior_df, conf)
    new_lo, new_hi, disjoint = max(cs.lo_log, lo), min(cs.hi_log, hi), cs.disjoint
    if new_lo > new_hi:  # only outside the coverage event: trust the latest interval alone
        new_lo, new_hi, disjoint = lo, hi, True
    updated = replace(cs, n=len(d_values), mean_log=mean, lo_log=new_lo, hi_log=new_hi, disjoint=disjoint)
    outcome = decide(updated.interval, s.threshold_pct, s.direction)
    if outcome != Outcome.INCONCLUSIVE:
        updated = replace(updated, outcome=outcome, decided_at=look)
    return updated


def observe(state: SequentialState, d_by_check: Mapping[str, Sequence[float]]) -> SequentialState:
    """Judge one more look, given ALL paired log ratios so far per check (a check absent from
    `d_by_check` keeps its state)."""
    look = state.looks + 1
    if look > state.design.max_looks:
        raise ValueError(f"look {look} is past the design's maximum of {state.design.max_looks}")
    unknown = sorted(set(d_by_check) - set(state.checks))
    if unknown:
        raise ValueError(f"no such check in the design: {', '.join(unknown)}")
    conf = state.design.confidence_at(look)
    checks = {
        name: _judge_check(cs, d_by_check.get(name, ()), look, conf) for name, cs in state.checks.items()
    }
    return replace(state, checks=checks, looks=look)


def overall(state: SequentialState) -> Outcome:
    """Worst outcome of the checks so far (no checks: pass, as `verdict.worst`)."""
    return worst([c.outcome for c in state.checks.values()])


def next_action(
    state: SequentialState,
    *,
    seconds_spent: float = 0.0,
    budget_s: float | None = None,
    round_s: float | None = None,
) -> Action:
    """Stop or run another round, and why. `round_s` is the expected length of one more round
    (e.g. the mean of the rounds so far); a round that would not fit the budget is not started."""
    outcome = overall(state)
    failed = [n for n, c in state.checks.items() if c.outcome == Outcome.FAIL]
    undecided = [n for n, c in state.checks.items() if c.outcome == Outcome.INCONCLUSIVE]
    if failed and (state.design.stop_on_fail or not undecided):
        return Action(True, Outcome.FAIL, f"failed: {', '.join(failed)}")
    if not undecided:
        return Action(True, outcome, f"every check decided after {state.looks} round(s)")
    if state.looks >= state.design.max_looks:
        return Action(True, outcome, f"max rounds ({state.design.max_looks}) reached; "
                      f"undecided: {', '.join(undecided)}")
    if budget_s is not None and seconds_spent + (round_s or 0.0) > budget_s:
        return Action(True, outcome, f"budget: {seconds_spent:.0f} s of {budget_s:.0f} s spent, "
                      f"another round needs about {round_s or 0.0:.0f} s; undecided: {', '.join(undecided)}")
    return Action(False, outcome, f"{len(undecided)} of {len(state.checks)} check(s) undecided: "
                  f"{', '.join(undecided)}")
