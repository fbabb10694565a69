"""Write gate/judge/look_levels.json: the per-look levels of the sequential test
(gate.judge.levels), by simulating standard normal units at either end of the test.

    nice -n 19 .venv/bin/python benchmarks/look_levels.py     # a few minutes

The table holds, per units per look (1: a block mean; 2: per_round servers' rounds of a block
of 2) and prior degrees of freedom, the scale g of the levels at a grid of error rates. It
stores, for each tabled prior, the smaller of its own g and the next tabled prior's: the lookup
takes the tabled prior at or below a run's, so a prior between two tabled ones gets a level no
larger than either's. It prints the table's hash.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gate.judge import levels  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "gate" / "judge" / levels.TABLE
PRIOR_DFS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 60)
UNITS = (1, 2)
ERRORS = np.geomspace(2e-5, 0.2, 41)
PATHS = 400_000
SEED = 20261203


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--paths", type=int, default=PATHS)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    scales: dict[str, dict[str, list[float]]] = {}
    started = time.monotonic()
    for units in UNITS:
        scales[str(units)] = {}
        found = []
        for df in PRIOR_DFS:
            found.append(np.quantile(levels.crossing_scale(df, units, args.paths, SEED), ERRORS))
            print(f"units {units} prior df {df:>2}: g at 0.1% "
                  f"{np.interp(1e-3, ERRORS, found[-1]):.3g} at 5% "
                  f"{np.interp(0.05, ERRORS, found[-1]):.3g} "
                  f"[{time.monotonic() - started:.0f} s]", flush=True)
        for i, df in enumerate(PRIOR_DFS):
            safe = np.minimum(found[i], found[min(i + 1, len(found) - 1)])
            scales[str(units)][str(df)] = [float(f"{x:.6g}") for x in safe]
    table = {"horizon": levels.LOOK_HORIZON, "first_look": levels.FIRST_LOOK,
             "flat_looks": levels.FLAT_LOOKS, "paths": args.paths, "seed": SEED,
             "errors": [float(f"{e:.6g}") for e in ERRORS], "scales": scales}
    text = json.dumps(table, indent=1) + "\n"
    args.out.write_text(text)
    print(f"wrote {args.out} (sha256 {hashlib.sha256(text.encode()).hexdigest()[:16]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
