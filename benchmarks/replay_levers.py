"""What-if replays of finished A/Bs: would another rule have decided them sooner?

Judges each `gate ab` folder's measured rounds again (no server, no measurement: seconds), as
shipped and under one lever at a time, and prints the round each verdict decided at and the
minutes that took (the run's wall time prorated by rounds: a first block carries the model
build, so early decisions read slightly optimistic). The levers are NOT the shipped rule; each
is a change to the test someone might propose, replayed on real rounds before anyone argues
for it:

- `horizon=H`: the per-look levels spread over H looks instead of gate.judge.levels'
  LOOK_HORIZON (a design that may not be resumed past H blocks);
- `beta=B`: a check passes with at most B (instead of sequential.BETA) at 1.5x its threshold,
  i.e. B of the changes of 1.5x a threshold end green;
- `pooled`: the drain and the sweep's guided cell at the drain's concurrency are two windows
  of one condition in each round; their figures are pooled (geometric mean) for the drain
  and that level's guided checks.

It also prints how the two windows of that one condition agree within a round: a correlation
near 0 says a window's noise is its own (pooling two windows halves its variance), near 1 that
it is the round's (only more rounds or server pairs shrink it). Whether one longer window
shrinks it as much is another measurement (docs/compare.md: here it did not).

    .venv/bin/python benchmarks/replay_levers.py --from-nothing RUNS/from-nothing*/{aa,quarter}-* \
        --calibrated RUNS/from-nothing*/after-*

`--from-nothing` folders are judged with no calibration (as they ran); `--calibrated` ones with
the calibrations their ab-state.json copied when they started.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import numpy as np

from gate.judge import checks as judge_checks
from gate.judge import compare as judge_compare
from gate.judge import levels, sequential
from gate.judge import noise as noise_module
from gate.judge.compare import ABReference, compare_results
from gate.judge.noise import Noise, NoiseCalibration
from gate.judge.verdict import Outcome, Verdict
from gate.measure.results import Results, load_results
from gate.plan.thresholds import Thresholds

LEVERS = ("shipped", "horizon=5", "beta=0.10", "pooled", "horizon=5+pooled+beta=0.10")
PATHS = 200_000


def _weights(horizon: int) -> np.ndarray:
    """The shipped weights of looks 1..LOOK_HORIZON, none past `horizon`."""
    w = levels.look_weights()
    return np.where(np.arange(1, w.size + 1) <= horizon, w, 0.0)


@cache
def _scale(prior_df: int, units: int, error: float, horizon: int) -> float:
    """g of the levels with the looks cut at `horizon` (gate.judge.levels.crossing_scale)."""
    g = levels.crossing_scale(prior_df, units, PATHS, seed=20261206, horizon=horizon)
    return float(g[int(error * PATHS)])


_shipped_per_repeat = judge_checks.per_repeat
_shipped_levels = sequential._levels
_shipped_enough = noise_module.ENOUGH_BLOCK_DF


def _pooled(results: Results, slot: judge_checks.Slot) -> dict[int, float]:
    own = _shipped_per_repeat(results, slot)
    metric = slot.metric
    if metric.phase not in ("drain", "sweep") or metric.arm != "guided":
        return own
    twin = "sweep" if metric.phase == "drain" else "drain"
    cells = {c.repeat: c for c in results.cells_of(twin, "guided", slot.concurrency)
             if c.completed > 0}
    out = {}
    for repeat, value in own.items():
        other = metric.get(cells[repeat]) if repeat in cells else None
        out[repeat] = math.sqrt(value * other) if other and other > 0 else value
    return out


@contextlib.contextmanager
def lever(name: str) -> Iterator[None]:
    """The judge with the named levers applied ("+" joins several), restored on the way out."""
    settings = dict(part.partition("=")[::2] for part in name.split("+"))
    unknown = set(settings) - {"shipped", "horizon", "beta", "pool-df", "pooled"}
    if unknown:
        raise SystemExit(f"unknown lever(s) in {name!r}: {', '.join(sorted(unknown))}")
    horizon = int(settings["horizon"]) if "horizon" in settings else None
    beta = float(settings["beta"]) if "beta" in settings else sequential.BETA

    def levels_of(design: sequential.Design, df: int, error: float) -> np.ndarray:
        error = beta if error == sequential.BETA else error
        if horizon is None:
            return _shipped_levels(design, df, error)
        return _scale(int(df), design.units_per_block, error, horizon) * _weights(horizon)

    try:
        sequential._levels = levels_of  # type: ignore[assignment]
        if "pool-df" in settings:
            noise_module.ENOUGH_BLOCK_DF = int(settings["pool-df"])
        if "pooled" in settings:
            judge_compare.per_repeat = _pooled  # type: ignore[assignment]
        yield
    finally:
        sequential._levels = _shipped_levels  # type: ignore[assignment]
        noise_module.ENOUGH_BLOCK_DF = _shipped_enough
        judge_compare.per_repeat = _shipped_per_repeat  # type: ignore[assignment]


def replay(folder: Path, *, calibrated: bool, levers: tuple[str, ...] = LEVERS
           ) -> dict[str, tuple[str, int | None, float | None]]:
    """Per lever: outcome, the round the verdict decided at (None: undecided), its minutes."""
    state = json.loads((folder / "ab-state.json").read_text())
    cals = [NoiseCalibration.model_validate(c) for c in state["calibrations"]] if calibrated \
        else []
    noise = Noise(calibrations=cals, description="replay")
    head, base = load_results(folder / "head"), load_results(folder / "base")
    thresholds = Thresholds.model_validate(state["thresholds"])
    wall = json.loads((folder / "verdict.json").read_text())["runner_seconds"]["wall"]
    rounds_run = state["rounds_done"]
    out = {}
    for name in levers:
        with lever(name):
            verdict = compare_results(head, ABReference(base), thresholds, noise=noise)
        at = _decided_at(verdict)
        minutes = wall * at / rounds_run / 60 if at else None
        out[name] = (verdict.outcome.value, at, minutes)
    return out


def _decided_at(verdict: Verdict) -> int | None:
    """The round the verdict was decided at: its first failing check's, or (a pass) the last
    of its checks' to pass; None when undecided."""
    tested = [c for c in verdict.checks
              if not c.name.startswith(("spread.", "validity.", "requests."))]
    if verdict.outcome == Outcome.FAIL:
        return min((c.decided_at_round for c in tested
                    if c.outcome == Outcome.FAIL and c.decided_at_round), default=None)
    rounds = [c.decided_at_round for c in tested]
    if verdict.outcome != Outcome.PASS or None in rounds:
        return None
    return max(r for r in rounds if r is not None)


def window_agreement(folders: list[Path]) -> tuple[int, float] | None:
    """Side-rounds and the correlation, within blocks, of the drain's and the sweep's guided
    window at the drain's concurrency (log requests per minute)."""
    deviations = []
    for folder in folders:
        for side in ("base", "head"):
            results = load_results(folder / side)
            size = results.plan.ab.rounds_per_block
            level = results.plan.drain.concurrency
            drain = {c.repeat: c.requests_per_min for c in results.cells_of("drain", "guided", level)}
            sweep = {c.repeat: c.requests_per_min for c in results.cells_of("sweep", "guided", level)}
            repeats = sorted(set(drain) & set(sweep))
            for start in range(0, len(repeats) - size + 1, size):
                block = repeats[start:start + size]
                x = np.log([[drain[r], sweep[r]] for r in block])
                deviations.append(x - x.mean(axis=0))
    if not deviations:
        return None
    d = np.concatenate(deviations)
    return len(d), float(np.corrcoef(d[:, 0], d[:, 1])[0, 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-nothing", nargs="*", default=[], type=Path)
    parser.add_argument("--calibrated", nargs="*", default=[], type=Path)
    parser.add_argument("--levers", nargs="+", default=list(LEVERS),
                        help="rules to replay, each a lever or levers joined by '+': shipped, "
                        "horizon=H, beta=B, pooled, pool-df=N (a calibration pools runs until "
                        "N block-mean df, not ENOUGH_BLOCK_DF)")
    args = parser.parse_args()
    levers_asked = tuple(args.levers)
    header = f"{'run':34s} " + " ".join(f"{name:>20s}" for name in levers_asked)
    print(header)
    minutes: dict[tuple[str, str], list[float | None]] = {}
    for folders, calibrated in ((args.from_nothing, False), (args.calibrated, True)):
        for folder in folders:
            row = replay(folder, calibrated=calibrated, levers=levers_asked)
            series = folder.name.split("-")[0] + ("" if not calibrated else " (calibrated)")
            cells = []
            for name, (outcome, at, mins) in row.items():
                cells.append(f"{outcome[:4]} {at or '-':>2} {f'{mins:.1f}' if mins else '-':>5}m")
                minutes.setdefault((series, name), []).append(mins)
            label = f"{folder.parent.name}/{folder.name}"
            print(f"{label:34s} " + " ".join(f"{c:>20s}" for c in cells), flush=True)
    print("\nper series: decided runs / runs, median minutes of all (undecided counted as "
          "not decided within the run)")
    for series in sorted({s for s, _ in minutes}):
        cells = []
        for name in levers_asked:
            values = minutes[(series, name)]
            decided = [m for m in values if m is not None]
            median = statistics.median([m if m is not None else math.inf for m in values])
            cells.append(f"{len(decided)}/{len(values)} {median:5.1f}m")
        print(f"{series:34s} " + " ".join(f"{c:>20s}" for c in cells))
    agreement = window_agreement([*args.from_nothing, *args.calibrated])
    if agreement is not None:
        n, r = agreement
        print(f"\ntwo windows of one condition in one round (drain, and the sweep's guided cell "
              f"at its concurrency): correlation {r:+.2f} within blocks over {n} side-rounds")


if __name__ == "__main__":
    main()
