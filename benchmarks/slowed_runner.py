"""Run a command (by default the end-to-end tests) on this machine slowed down, as if it were a
slower runner class: neighbour processes that spin on every core take their share of the CPU
for as long as the command runs, then stop.

    python benchmarks/slowed_runner.py                      # the timing-sensitive tests, one spinner per core (~2x slower)
    python benchmarks/slowed_runner.py --spinners 1 -- make test

With one spinner per core, every process of the suite (vLLM's worker, engine core and API
server, the gate's client) gets about half a core where it had one: the machine behaves like a
runner about twice as slow, which is the gap measured between the two 2-core runner classes
the suite runs on. A suite whose assertions encode one machine's speed fails here; one that
states its expectations relative to what the base build measured in the same run passes.
By default it runs the tests whose verdicts come from timing: tests/e2e (real vLLM) and the
A/Bs on the stand-in server (SLOW_BY_DEFAULT).

It prints the command's wall time and exit code, and exits with the command's exit code.
It measures nothing by itself: run it alone on the machine.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SLOW_BY_DEFAULT = ["tests/e2e", "tests/integration/flows/test_ab_ttft.py",
                   "tests/integration/flows/test_bisect_stand_in.py",
                   "tests/integration/flows/test_ab_runner_rule.py"]


def spin() -> None:
    while True:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spinners", type=int, default=os.cpu_count() or 1,
                        help="neighbour processes that spin (default: one per core)")
    parser.add_argument("command", nargs="*",
                        help="the command (default: pytest of SLOW_BY_DEFAULT)")
    args = parser.parse_args()
    command = args.command or [sys.executable, "-m", "pytest", "-v", "--durations=20",
                               *SLOW_BY_DEFAULT]
    spinners = [mp.Process(target=spin, daemon=True) for _ in range(args.spinners)]
    for p in spinners:
        p.start()
    print(f"slowed_runner: {args.spinners} spinner(s) on {os.cpu_count()} core(s); "
          f"running: {' '.join(command)}", flush=True)
    started = time.monotonic()
    try:
        code = subprocess.call(command, cwd=REPO)
    finally:
        for p in spinners:
            p.terminate()
            p.join()
    minutes = (time.monotonic() - started) / 60
    print(f"slowed_runner: exit {code} after {minutes:.1f} min with {args.spinners} "
          f"spinner(s)", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
