"""The default branch watched, on real measurements: nights of `gate run` (cpu-smoke, a real
`vllm serve`) appended to a fresh history under distinct commits, the slowed build of the
test fixture (tests/fixtures/slow_bitmask) on the nights asked for, then detection, the
chart, the dashboard (and its headless-Chromium screenshot), and the baseline it would or
would not promote.

Run it alone on the machine, under the vLLM lock, with its own cache (README "Tests and
benchmarks"; every night is a server start, about 3 minutes on a 2-core runner):

    flock /tmp/gate-vllm.lock env GATE_CACHE_DIR=/work/cache-hist \\
        .venv/bin/python benchmarks/history_demo.py --out /work/runs/history-demo

Default: 7 nights, the last one slowed: that one night is no change point (it shows as
pending, the night is refused as a baseline); `--slow 5,6,7` makes the slowdown persist, and
detection finds it at night 5. `--results-from DIR` replays stored night folders
(DIR/night-N/results.json) instead of measuring: what the suite does
(tests/integration/benchmarks/test_history_demo.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "slow_bitmask"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


@dataclass(frozen=True)
class Night:
    number: int  # 1-based
    commit: str
    commit_time: str
    slowed: bool


def nights_to_run(count: int, slow: set[int]) -> list[Night]:
    """`count` nights a day apart, each its own (made-up, stable) 40-character commit."""
    if count < 6:
        raise SystemExit("at least 6 nights: detection needs 3 before and 3 after a change")
    if not slow <= set(range(1, count + 1)):
        raise SystemExit(f"--slow names nights outside 1..{count}")
    return [Night(i, hashlib.sha1(f"history-demo night {i}".encode()).hexdigest(),
                  f"2026-12-{i:02d}T03:00:00+00:00", i in slow) for i in range(1, count + 1)]


def gate(*args: object, env: dict[str, str] | None = None, check: bool = True
         ) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "gate.cli", *(str(a) for a in args)]
    full = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), (env or {}).get("PYTHONPATH")]))}
    full.update({k: v for k, v in (env or {}).items() if k != "PYTHONPATH"})
    print("+ gate " + " ".join(str(a) for a in args), flush=True)
    proc = subprocess.run(cmd, env=full, text=True, capture_output=True, cwd=ROOT)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr[-4000:])
    if check and proc.returncode != 0:
        raise SystemExit(f"gate {args[0]} exited {proc.returncode}")
    return proc


def measure(night: Night, out: Path, replay: Path | None) -> Path:
    folder = out / f"night-{night.number}"
    if replay is not None:
        shutil.copytree(replay / folder.name, folder, dirs_exist_ok=True)
        return folder
    env = {"PYTHONPATH": str(FIXTURE)} if night.slowed else {}
    gate("run", "--plan", "cpu-smoke", "--out", folder, "--label", f"night-{night.number}",
         "--quiet", env=env)
    return folder


def screenshot(html: Path, png: Path) -> str:
    exe = shutil.which("chromium")
    if exe is None:
        return "chromium not installed: no screenshot (apt-get install -y chromium)"
    profile = png.parent / "chromium-profile"
    subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                    "--window-size=1000,1400", f"--screenshot={png}", html.resolve().as_uri()],
                   capture_output=True, timeout=120, check=False)
    shutil.rmtree(profile, ignore_errors=True)
    return f"screenshot {png}" if png.is_file() else "chromium wrote no screenshot"


def summary(detection: dict, nights: list[Night]) -> list[str]:
    """What the run should show, in words, from changepoints.json."""
    lines = []
    by_commit = {n.commit: n.number for n in nights}
    for s in detection["series"]:
        if s["check"] != "drain.req_per_min":
            continue
        for cp in s["change_points"]:
            lines.append(f"change point: {s['check']} {cp['change_pct']:+.1f}% at night "
                         f"{by_commit.get(cp['first_bad'], '?')} (p {cp['p_value']:.1e}, "
                         f"{cp['persistence']} nights)")
        if s["pending"]:
            p = s["pending"]
            lines.append(f"pending: the last {p['nights']} night(s) {p['change_pct']:+.1f}% off "
                         "the level (not a change point yet)")
        lines.append(f"latest night regressed: {s['latest_regressed']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--nights", type=int, default=7)
    p.add_argument("--slow", default="", help="nights slowed by the fixture, e.g. 5,6,7 "
                   "(default: the last night only)")
    p.add_argument("--results-from", type=Path, help="replay stored night folders")
    args = p.parse_args(argv)
    slow = {int(x) for x in args.slow.split(",") if x} or {args.nights}
    nights = nights_to_run(args.nights, slow)
    args.out.mkdir(parents=True, exist_ok=True)
    db, cps = args.out / "history.sqlite", args.out / "changepoints.json"
    if db.exists():
        raise SystemExit(f"{db} exists: give a fresh --out")
    for night in nights:
        folder = measure(night, args.out, args.results_from)
        gate("history", "add", folder, "--db", db, "--commit", night.commit, "--commit-time",
             night.commit_time, "--branch", "main", "--source", "manual")
    gate("history", "show", "--db", db)
    gate("history", "show", "--db", db, "--check", "drain.req_per_min")
    gate("history", "detect", "--db", db, "--out", cps)
    gate("history", "chart", "--db", db, "--check", "drain.req_per_min", "--out",
         args.out / "drain-chart.png")
    html = args.out / "dashboard.html"
    gate("history", "dashboard", "--db", db, "--detection", cps, "--out", html)
    print(screenshot(html, args.out / "dashboard.png"))
    last = args.out / f"night-{nights[-1].number}"
    promoted = gate("baseline", "update", last, "--baselines-dir", args.out / "baselines",
                    "--branch", "main", "--commit", nights[-1].commit, "--detection", cps,
                    check=False)
    lines = summary(json.loads(cps.read_text()), nights)
    lines.append("last night promoted to baseline: "
                 + ("yes" if promoted.returncode == 0 else "no (refused: a regressed night)"))
    print("\n".join(["", "== what it shows", *lines]))
    (args.out / "summary.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
