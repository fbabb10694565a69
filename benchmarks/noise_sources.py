"""What lowers the spread on this runner: `gate calibrate` of cpu-smoke as it ships and with
each noise-reducing plan key (docs/compare.md, "Less noise at the source"), then one table of
every check's spreads and a block's cost per variant.

Variants (a plan file each, written to OUT/plans/):

- `shared`: cpu-smoke as shipped (both servers of a block up on every CPU);
- `paused`: `ab.isolation: paused`, the idle server stopped (SIGSTOP) while the other
  measures a cell;
- `split`: `ab.isolation: split`, each server bound to its own half of the CPUs;
- `longer-c4`: `sweep.level_window_s: {4: 12}`, twice the window for the c=4 cells (the
  noisiest judged checks of the kept calibration were at c=4).

Each calibration is its own plan hash or isolation, so none pools with another. A variant is
worth keeping when its block mean sd is lower at a block cost that does not eat the gain
(blocks needed scale with the variance: half the sd at twice the cost is still a gain of 2).
Run it alone on the machine, under the lock every real server takes:

    flock /tmp/gate-vllm.lock .venv/bin/python benchmarks/noise_sources.py --blocks 10 \\
        --out /tmp/noise-sources

then the simulation of the gate on the winner (docs tables): `benchmarks/noise_simulation.py
--calibration OUT/noise-VARIANT/*.yaml --plan OUT/plans/VARIANT.yaml`.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from pathlib import Path

import yaml
from tabulate import tabulate

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gate.judge import noise as noise_mod  # noqa: E402
from gate.judge.ab_design import calibrated_design  # noqa: E402
from gate.judge.checks import planned_slots  # noqa: E402
from gate.plan.spec import load_plan  # noqa: E402

VARIANTS = {
    "shared": {},
    "paused": {"ab": {"isolation": "paused"}},
    "split": {"ab": {"isolation": "split"}},
    "longer-c4": {"sweep": {"level_window_s": {4: 12}}},
}


def plan_file(out: Path, name: str) -> Path:
    data = load_plan("cpu-smoke").model_dump(mode="json")
    for section, changes in VARIANTS[name].items():
        data[section].update(changes)
    data["name"] = f"cpu-smoke-{name}"
    path = out / "plans" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def calibrate(out: Path, name: str, blocks: int) -> Path:
    noise = out / f"noise-{name}"
    cmd = [sys.executable, "-m", "gate.cli", "calibrate", "--plan", str(plan_file(out, name)),
           "--blocks", str(blocks), "--noise-dir", str(noise), "--out", str(out / f"calib-{name}"),
           "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "GATE_CACHE_DIR": os.environ.get("GATE_CACHE_DIR", str(out / "cache"))}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
    print(f"{name}: exit {proc.returncode}\n{proc.stdout}{proc.stderr[-2000:]}", flush=True)
    return noise


def rows(out: Path, name: str) -> list[list[str]]:
    plan = load_plan(str(plan_file(out, name)))
    found = noise_mod.load_all_calibrations(out / f"noise-{name}")
    if not found:
        return [[name, "-", "no calibration stored", "", "", ""]]
    cal = found[0][1]
    design = calibrated_design(plan)
    cost = noise_mod.Noise((cal,)).cost(design)
    block_s = cost.block_s(design.rounds_per_block) if cost else math.nan
    table = []
    for slot in planned_slots(plan, plan.thresholds):
        pooled = noise_mod.pool(cal.runs, slot.name, design)
        spread = pooled.spread()
        table.append([name, slot.name, f"{math.sqrt(pooled.block_var or 0):.1%}",
                      f"{spread.between:.1%}" if spread else "-",
                      f"{spread.within:.1%}" if spread else "-", f"{block_s:.0f}"])
    return table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("/tmp/gate-noise-sources"))
    p.add_argument("--blocks", type=int, default=10)
    p.add_argument("--variants", default=",".join(VARIANTS))
    args = p.parse_args(argv)
    names = [v for v in args.variants.split(",") if v]
    unknown = set(names) - set(VARIANTS)
    if unknown:
        sys.exit(f"unknown variant(s) {sorted(unknown)}; known: {', '.join(VARIANTS)}")
    for name in names:
        calibrate(args.out, name, args.blocks)
    print(tabulate([r for name in names for r in rows(args.out, name)],
                   headers=["variant", "check", "block mean sd", "between pairs",
                            "between rounds", "block s"], disable_numparse=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
