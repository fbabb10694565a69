"""The change-point detection (gate/history/detect.py) on replays of synthetic nightly series,
with the night-to-night noise of the stored CPU calibrations (the quiet runner's, about 3%,
and the noisy runner's, about 11%): how often each done-when property holds over many seeds,
where the suite checks it on a fixed few (tests/unit/history/test_detect.py).

- the seed's step (233 -> 121 req/min at night 40 of 60): exactly one change point, at 40;
- a 10% step at night 40: found (at 40 +- 1) within 5 nights, and how many nights it takes;
- pure noise, 60 nights: false change points per series;
- one bad night (x0.5 or x1.6) in 60: change points it causes.

    .venv/bin/python benchmarks/changepoint_replays.py --seeds 200   # about a minute
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gate.history.detect import detect_series  # noqa: E402
from gate.history.replay import (  # noqa: E402
    SEED_AFTER,
    SEED_BEFORE,
    as_series,
    calibration_noise,
    nights,
    pct,
)

ROOT = Path(__file__).resolve().parents[1]
CALIBRATIONS = {"quiet": ROOT / "baselines/noise/cpu-smoke--cpu-amd-epyc.yaml",
                "noisy": ROOT / "benchmarks/calibrations/cpu-smoke--amd-epyc-2026-12-02.yaml"}


def found(values: list[float]) -> list[int]:
    return [cp.index for cp in detect_series(as_series(values)).change_points]


def nights_to_find(values: list[float], at: int, most: int) -> int | None:
    for k in range(1, most + 1):
        if any(abs(i - at) <= 1 for i in found(values[: at + k])):
            return k
    return None


def row(name: str, sd: float, seeds: int) -> list[object]:
    exact = sum(found(nights(60, level=SEED_BEFORE, sd=sd, seed=s, step_at=40,
                             step=SEED_AFTER / SEED_BEFORE)) == [40] for s in range(seeds))
    takes = [nights_to_find(nights(60, level=SEED_BEFORE, sd=sd, seed=10_000 + s, step_at=40,
                                   step=0.9), 40, 20) for s in range(seeds)]
    within5 = sum(1 for k in takes if k is not None and k <= 5)
    known = sorted(k for k in takes if k is not None)
    median = known[len(known) // 2] if known else None
    false = sum(len(found(nights(60, level=SEED_BEFORE, sd=sd, seed=20_000 + s)))
                for s in range(seeds))
    spikes = sum(len(found(nights(60, level=SEED_BEFORE, sd=sd, seed=30_000 + s, spike_at=30,
                                  spike=f))) for s in range(seeds) for f in (0.5, 1.6))
    return [name, f"{pct(sd):.1f}%", f"{exact}/{seeds}", f"{within5}/{seeds}",
            f"{len(known)}/{seeds}", median if median is not None else "-",
            f"{false / seeds:.3f}",
            f"{false / seeds * 20:.2f}", f"{spikes}/{2 * seeds}"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=100)
    args = p.parse_args()
    rows = [row(name, calibration_noise(path), args.seeds) for name, path in CALIBRATIONS.items()]
    print(tabulate(rows, headers=["runner", "night sd", "seed step: one at 40",
                                  "10% step found in <=5 nights", "in <=20",
                                  "median nights (of those)",
                                  "false per series", "false per 20 series",
                                  "spikes -> change points"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
