"""The per-look levels of the sequential test (gate.judge.sequential), from a table generated
once by simulation (benchmarks/look_levels.py writes gate/judge/look_levels.json).

At either end of the test (a change exactly at the threshold, or at 1.5x it) the one-sided t
statistic of the units so far does not depend on the runner's noise: the units are normal
with a mean at the end and any spread, and a calibration is a chi-square sample of that same
spread. So the chance that the test crosses an end at some look is the same on every runner,
and one simulation of standard normal units gives it. The level at look J is g x w_J: the
weights w_J are 0 before FIRST_LOOK, 1 up to FLAT_LOOKS, then (FLAT_LOOKS / J)^2, and g is
the `error` quantile of the smallest g at which a simulated path crosses (`crossing_scale`).
The table holds g per (prior degrees of freedom, units per look, error); a prior's degrees of
freedom between two tabled values take the lower one (g grows with them: the generator
checks), so the levels are never bolder than their degrees of freedom allow.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources

import numpy as np
from scipy import special

# Looks the levels hold for: no design is longer (gate.judge.reach.LONGEST_BLOCKS).
LOOK_HORIZON = 60
# The t test's first look: the second block. The first gives one block mean but, without a
# calibration, no spread of block means; with one, a single block is the look at which a
# runner noisier than its calibration would fool the test most.
FIRST_LOOK = 2
# Looks of full weight; later ones weigh (FLAT_LOOKS / J)^2, so the weights add up to a
# finite total however long a design (or its --resume) runs.
FLAT_LOOKS = 6
TABLE = "look_levels.json"


def look_weights(horizon: int = LOOK_HORIZON) -> np.ndarray:
    """w_J for J = 1..horizon."""
    j = np.arange(1, horizon + 1, dtype=float)
    w = np.where(j <= FLAT_LOOKS, 1.0, (FLAT_LOOKS / j) ** 2)
    return np.where(j < FIRST_LOOK, 0.0, w)


def crossing_scale(prior_df: int, units_per_look: int, paths: int, seed: int, *,
                   horizon: int = LOOK_HORIZON) -> np.ndarray:
    """Per simulated path of standard normal units: the smallest g at which the one-sided t
    test (units so far, pooled with a chi-square prior of `prior_df` df) with per-look level
    g x w_J crosses at some look within `horizon` looks (the table's: LOOK_HORIZON); sorted."""
    rng = np.random.default_rng([seed, prior_df, units_per_look])
    w = look_weights(horizon)
    looks = np.flatnonzero(w > 0)
    n = (looks + 1) * units_per_look  # units behind each look
    df = prior_df + n - 1.0
    out = []
    chunk = 20_000
    for start in range(0, paths, chunk):
        size = min(chunk, paths - start)
        z = rng.standard_normal((size, horizon * units_per_look))
        prior = rng.chisquare(prior_df, size)[:, None] if prior_df > 0 else 0.0
        total = np.cumsum(z, axis=1)[:, n - 1]
        squares = np.cumsum(z * z, axis=1)[:, n - 1]
        mean = total / n
        s2 = (prior + squares - n * mean**2) / df
        p = special.stdtr(df, -mean / np.sqrt(s2 / n))
        out.append((p / w[looks]).min(axis=1))
    return np.sort(np.concatenate(out))


@lru_cache(maxsize=1)
def _table() -> dict:
    return json.loads(resources.files("gate.judge").joinpath(TABLE).read_text())


def level_scale(prior_df: int, units_per_look: int, error: float) -> float:
    """g for this prior, unit and error (log-log interpolation between tabled errors)."""
    table = _table()
    errors = np.asarray(table["errors"], float)
    if not errors[0] <= error <= errors[-1]:
        raise ValueError(f"an error rate of {error:g} per check is outside the levels' table "
                         f"({errors[0]:g} to {errors[-1]:g}): too many checks in one family")
    by_df = table["scales"][str(units_per_look)]
    tabled = sorted(int(k) for k in by_df)
    use = max((k for k in tabled if k <= max(int(prior_df), 0)), default=tabled[0])
    g = np.asarray(by_df[str(use)], float)
    return float(math.exp(np.interp(math.log(error), np.log(errors), np.log(g))))


def look_levels(prior_df: int, units_per_look: int, error: float) -> np.ndarray:
    """The one-sided level of each look J = 1..LOOK_HORIZON: a change at the end crosses at
    some look with probability `error`."""
    return level_scale(prior_df, units_per_look, error) * look_weights()
