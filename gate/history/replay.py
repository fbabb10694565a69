"""Synthetic nightly series for replays of the detection (its tests, benchmarks/
changepoint_replays.py, the README's pictures): nights of one check drawn around a level with a
night-to-night noise taken from a stored calibration, with a step or a single bad night
where asked. The draws are seeded, so a replay is the same on every machine."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from gate.history.model import Direction, Point, Series
from gate.judge.noise import load_calibration

# The seed story: drain req/min went from 233 to 121 (vllm-project/vllm#49013).
SEED_BEFORE, SEED_AFTER = 233.0, 121.0


def nights(count: int, *, level: float, sd: float, seed: int, step_at: int | None = None,
           step: float = 1.0, spike_at: int | None = None, spike: float = 1.0) -> list[float]:
    """`count` nights around `level` with log-normal noise of sd `sd` (log scale); from night
    `step_at` on the level is multiplied by `step`; night `spike_at` alone by `spike`."""
    rng = np.random.default_rng(seed)
    values = level * np.exp(rng.normal(0.0, sd, count))
    if step_at is not None:
        values[step_at:] *= step
    if spike_at is not None:
        values[spike_at] *= spike
    return [float(v) for v in values]


def as_series(values: list[float], *, check: str = "drain.req_per_min",
              label: str = "drain req/min (guided)", unit: str = "req/min",
              direction: Direction = "higher_is_better", plan: str = "cpu-smoke",
              runner_class: str = "cpu: replay", commits: list[str] | None = None) -> Series:
    """The values as a history series, night i at commit `commits[i]` (default: a fake
    40-character SHA per night)."""
    shas = commits or [f"{i + 1:040x}" for i in range(len(values))]
    points = [Point(run_id=i + 1, commit=shas[i], at=f"2026-01-01T00:00:00+00:00#{i:05d}",
                    value=v, n=1) for i, v in enumerate(values)]
    return Series(plan=plan, runner_class=runner_class, check=check, label=label, unit=unit,
                  direction=direction, judged=True, points=points)


def calibration_noise(path: Path, check: str = "drain.req_per_min") -> float:
    """How much one measurement of `check` varies (log scale) in a stored noise calibration:
    the largest spread of a round around its block's mean over the calibration's runs (one
    night is one such measurement on its own server)."""
    cal = load_calibration(path)
    spreads = [c.within_sd for run in cal.runs for name, c in run.checks.items()
               if name == check]
    found = [s for s in spreads if s]
    if not found:
        raise ValueError(f"{path}: no spread for {check}")
    return float(max(found))


def pct(sd: float) -> float:
    return math.expm1(sd) * 100.0
