"""Bootstrap intervals for `gate compare` (method described in docs/compare.md).

Every figure on each side (head, base) becomes an `Estimate`: the point value and `samples`
bootstrap replicates of it in the same unit. Where the replicates come from:

- two or more repeats: resample the per-repeat figures with replacement, take the mean;
- one repeat with raw records: resample the cell's requests (percentiles of TPOT or of the
  pooled ITLs of the resampled requests; drain throughput through Little's law, see
  `little_factors`);
- a baseline given as mean/std/n: a parametric (log-normal) bootstrap;
- nothing to resample: the point alone.

Then a floor: a run-to-run spread (`Thresholds.run_noise_pct`) that no resampling inside one
run can see. When a side's replicates vary less than floor/sqrt(n) (log scale), normal noise
tops them up to it. The relative change's interval is the percentile interval of
head_replicate / base_replicate - 1, the two sides drawn independently.

Everything is seeded from the check's name, so a verdict is reproducible bit for bit.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_SAMPLES = 2000
# Request-level bootstraps over pooled ITLs touch every gap per replicate: cap the work.
_MAX_POOLED_WORK = 40_000_000


@dataclass
class Estimate:
    """One side's figure and its bootstrap replicates (same unit as `point`)."""

    point: float
    replicates: np.ndarray
    n: int  # independent measurements behind it (repeats; 1 for a single run)
    source: str  # for people: "3 repeats", "64 requests", ...


def rng_for(name: str, seed: int = 0) -> np.random.Generator:
    """A generator seeded from a check's name: reproducible, and independent across checks."""
    return np.random.default_rng([zlib.crc32(name.encode()), seed])


def constant(point: float, samples: int = DEFAULT_SAMPLES) -> np.ndarray:
    return np.full(samples, float(point))


def bootstrap_mean(values: Sequence[float], rng: np.random.Generator, samples: int = DEFAULT_SAMPLES) -> np.ndarray:
    """Means of `samples` resamples (with replacement) of the per-repeat values."""
    arr = np.asarray(values, dtype=float)
    idx = rng.integers(0, len(arr), size=(samples, len(arr)))
    return arr[idx].mean(axis=1)


def lognormal_draws(
    mean: float, std: float, n: int, rng: np.random.Generator, samples: int = DEFAULT_SAMPLES
) -> np.ndarray:
    """Parametric bootstrap of a mean reported as mean, std and n (log-normal, so positive)."""
    sd = (std / mean) / np.sqrt(max(n, 1)) if mean > 0 else 0.0
    return mean * np.exp(rng.normal(0.0, sd, samples))


def weighted_quantile_sorted(sorted_values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """Quantile q (0-1) of sorted values carrying integer weights, by linear interpolation
    between the order statistics of the expanded sample (numpy's default method)."""
    total = weights.sum()
    if total <= 0:
        return float("nan")
    pos = q * (total - 1)  # 0-based position in the expanded, sorted sample
    cum = np.cumsum(weights)
    lo = int(np.searchsorted(cum, np.floor(pos) + 1))
    hi = int(np.searchsorted(cum, np.ceil(pos) + 1))
    frac = pos - np.floor(pos)
    return float(sorted_values[lo] * (1 - frac) + sorted_values[hi] * frac)


def bootstrap_pooled_quantile(
    per_request: Sequence[Sequence[float]],
    q: float,
    rng: np.random.Generator,
    samples: int = DEFAULT_SAMPLES,
) -> tuple[float, np.ndarray]:
    """Resample requests with replacement; pool the values of the drawn requests (one TPOT
    per request, or every ITL gap of it) and take quantile q. Returns (the quantile of the
    original sample by the same method, the replicates)."""
    groups = [np.asarray(g, dtype=float) for g in per_request if len(g)]
    if not groups:
        return float("nan"), np.full(samples, np.nan)
    values = np.concatenate(groups)
    owner = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    order = np.argsort(values, kind="stable")
    sorted_values, sorted_owner = values[order], owner[order]
    reference = weighted_quantile_sorted(sorted_values, np.ones(len(values), dtype=np.int64), q)
    samples = min(samples, max(200, _MAX_POOLED_WORK // max(len(values), 1)))
    out = np.empty(samples)
    for b in range(samples):
        counts = np.bincount(rng.integers(0, len(groups), len(groups)), minlength=len(groups))
        out[b] = weighted_quantile_sorted(sorted_values, counts[sorted_owner], q)
    return reference, out


def little_factors(
    e2el_s: Sequence[float],
    output_tokens: Sequence[float],
    rng: np.random.Generator,
    per: str,
    samples: int = DEFAULT_SAMPLES,
) -> np.ndarray:
    """Relative bootstrap factors of a drain's throughput from one run.

    Throughput of a closed, concurrency-capped drain follows Little's law: requests/s =
    (mean requests in flight) / mean(E2EL), and tokens/s = in-flight x mean(tokens) /
    mean(E2EL). Holding the observed mean in-flight count fixed, resampling requests gives
    the replicates as factors of the observed figure: mean(E2EL)/mean(E2EL*) for requests,
    times mean(tokens*)/mean(tokens) for tokens.
    """
    e2el = np.asarray(e2el_s, dtype=float)
    tokens = np.asarray(output_tokens, dtype=float)
    idx = rng.integers(0, len(e2el), size=(samples, len(e2el)))
    factors = e2el.mean() / e2el[idx].mean(axis=1)
    if per == "token":
        factors *= tokens[idx].mean(axis=1) / tokens.mean()
    return factors


def with_floor(est: Estimate, floor_pct: float, rng: np.random.Generator, extra: float = 1.0) -> np.ndarray:
    """Log replicates of `est`, topped up with normal noise to at least
    extra * floor/sqrt(n) standard deviation (floor in %, log scale)."""
    logs = np.log(est.replicates)
    target = (extra * floor_pct / 100.0) ** 2 / max(est.n, 1)
    missing = target - float(np.var(logs))
    if missing > 0:
        logs = logs + rng.normal(0.0, np.sqrt(missing), len(logs))
    return logs


def relative_interval(
    head: Estimate,
    base: Estimate,
    confidence: float,
    floor_pct: float,
    rng: np.random.Generator,
) -> tuple[float, float, float]:
    """(delta %, interval low %, interval high %) of head/base - 1."""
    n = min(len(head.replicates), len(base.replicates))
    h = with_floor(head, floor_pct, rng)[:n]
    b = with_floor(base, floor_pct, rng)[:n]
    # pair replicates in a random order: the two sides were drawn independently
    rel = np.expm1(h - rng.permutation(b)) * 100.0
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(rel, [alpha, 1.0 - alpha])
    delta = (head.point / base.point - 1.0) * 100.0
    return float(delta), float(lo), float(hi)


def absolute_interval(
    est: Estimate, confidence: float, floor_pct: float, rng: np.random.Generator, extra: float = 1.0
) -> tuple[float, float]:
    """Percentile interval of a head-only figure (e.g. the guided/free ratio)."""
    logs = with_floor(est, floor_pct, rng, extra)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(np.exp(logs), [alpha, 1.0 - alpha])
    return float(lo), float(hi)
