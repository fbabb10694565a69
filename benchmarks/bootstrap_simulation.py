"""How often does `gate compare` (percentile bootstrap, fixed repeats) cry wolf, and how often
does it catch a slowdown? The sequential paired design of `gate ab` is simulated in
benchmarks/noise_simulation.py.

Draws simulated pairs of runs (base, head) with the spread measured on real runs
(shared/FACTS.md) and judges each pair with `gate.compare.compare_results`, exactly as
`gate compare --against` would:

- gpu: the seed harness (plan a100-gemma4-26b: drain of 2000, levels 1-64). The drain was
  repeatable to +-1 s of 513 s: 0.2% (1 sigma) per run. Per-token latencies on GPUs are not
  reported; assumed 2% per cell, twice the gate's GPU floor (1%).
- cpu: this 2-core machine (plan cpu-smoke, levels 1/8/32). Identical runs spread +-15-20% at
  concurrency 32 and +-25% between runs: modelled as 1 sigma 12.5% per figure, 10% of it a
  run-level shift that moves every cell of a run together (machine state), 7.5% per cell.

Each figure is true x exp(run shift) x exp(cell noise). A slowdown s makes the guided arm
(1+s) times slower: drain req/min and tok/s divided by 1+s, guided TPOT/ITL multiplied by
it; the free arm is untouched. Runs carry cell summaries only (no raw records), so a single
repeat's interval is the run-to-run floor; a request-level bootstrap can only widen it.

    .venv/bin/python benchmarks/bootstrap_simulation.py            # 1000 trials, plan repeats
    .venv/bin/python benchmarks/bootstrap_simulation.py --trials 300 --repeats 3
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gate.compare import compare_results  # noqa: E402
from gate.fingerprint import Fingerprint, GpuInfo  # noqa: E402
from gate.plan import load_plan  # noqa: E402
from gate.results import CellSummary, Distribution, Results, ServerInfo  # noqa: E402
from gate.thresholds import Thresholds  # noqa: E402
from gate.verdict import Outcome  # noqa: E402


@dataclass(frozen=True)
class Scenario:
    plan: str
    gpu: str | None
    rpm: float  # healthy drain req/min
    tok_per_req: float
    tpot_ms: dict[int, float]  # healthy guided TPOT p50 per level
    ratio: float  # healthy guided/free TPOT p50
    sigma_run: float  # run-level shift, 1 sigma (log)
    sigma_drain: float  # per-cell noise of the drain (log)
    sigma_cell: float  # per-cell noise of a sweep cell (log)
    p99_extra: float  # extra noise of p99 figures over p50 (log)


SCENARIOS = {
    "gpu": Scenario("a100-gemma4-26b", "NVIDIA A100-SXM4-80GB", 233.0, 400.0,
                    {1: 8.0, 8: 10.0, 16: 12.0, 32: 15.0, 64: 20.0}, 1.0,
                    sigma_run=0.001, sigma_drain=0.0017, sigma_cell=0.02, p99_extra=0.01),
    "cpu": Scenario("cpu-smoke", None, 300.0, 64.0, {1: 5.5, 8: 16.0, 32: 60.0}, 1.3,
                    sigma_run=0.10, sigma_drain=0.075, sigma_cell=0.075, p99_extra=0.03),
}


def _dist(p50: float, p99: float) -> Distribution:
    return Distribution(mean=p50, std=0.1 * p50, p50=p50, p90=(p50 + p99) / 2, p99=p99, count=100)


def _cell(phase, arm, level, repeat, rpm, tok, tpot50, tpot99, itl99) -> CellSummary:
    rps = rpm / 60.0
    return CellSummary(
        phase=phase, arm=arm, concurrency=level, repeat=repeat, requests=100, completed=100, failed=0,
        duration_s=100 / rps, total_output_tokens=int(100 * tok), request_throughput=rps,
        output_throughput=rps * tok, tpot_ms=_dist(tpot50, tpot99), itl_ms=_dist(tpot50, itl99),
        valid_outputs=100 if arm == "guided" else 0, invalid_outputs=0, length_finishes=0,
    )


def simulate_run(sc: Scenario, plan, rng: np.random.Generator, repeats: int, slowdown: float) -> Results:
    """One run (all its repeats) of the scenario, guided arm slowed by `slowdown`."""
    slow = 1.0 + slowdown
    cells = []
    for r in range(repeats):
        shift = rng.normal(0, sc.sigma_run)
        noise = np.exp(shift + rng.normal(0, sc.sigma_drain))
        rpm = sc.rpm * noise / slow
        cells.append(_cell("drain", "guided", plan.drain.concurrency, r, rpm, sc.tok_per_req, 1, 1, 1))
        for level in plan.sweep.levels:
            base_tpot = sc.tpot_ms.get(level, 10.0)
            for arm in ("guided", "free"):
                f = np.exp(shift + rng.normal(0, sc.sigma_cell))
                t50 = base_tpot * f * (slow if arm == "guided" else 1.0 / sc.ratio)
                t99 = 1.5 * t50 * np.exp(rng.normal(0, sc.p99_extra))
                i99 = 2.0 * t50 * np.exp(rng.normal(0, sc.p99_extra))
                rpm_cell = 60.0 * level * 1000 / (t50 * sc.tok_per_req)
                cells.append(_cell("sweep", arm, level, r, rpm_cell, sc.tok_per_req, t50, t99, i99))
    fp = Fingerprint(cpu_model="sim", gpus=[GpuInfo(name=sc.gpu)] if sc.gpu else [])
    return Results(
        created_at="sim", plan=plan, plan_hash=plan.measurement_hash(), fingerprint=fp,
        server=ServerInfo(base_url="sim", started_by_gate=False, model="sim"), cells=cells,
    )


def trials(scenario: str, n: int, slowdown: float, repeats: int | None = None, seed: int = 0,
           thresholds: Thresholds | None = None) -> Counter:
    """Outcomes of n head-vs-base verdicts (head slowed by `slowdown`)."""
    sc = SCENARIOS[scenario]
    plan = load_plan(sc.plan)
    repeats = repeats or plan.repeats
    thresholds = thresholds or plan.thresholds
    rng = np.random.default_rng(seed)
    counts: Counter = Counter()
    for _ in range(n):
        base = simulate_run(sc, plan, rng, repeats, 0.0)
        head = simulate_run(sc, plan, rng, repeats, slowdown)
        counts[compare_results(head, base, None, thresholds).outcome] += 1
    return counts


def _rates(c: Counter, n: int) -> str:
    return ", ".join(f"{o.value} {c[o] / n:6.1%}" for o in (Outcome.FAIL, Outcome.INCONCLUSIVE, Outcome.PASS, Outcome.ERROR))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--repeats", type=int, help="repeats per run (default: the plan's)")
    p.add_argument("--scenario", choices=sorted(SCENARIOS), action="append")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    worst_aa = 0.0
    for name in args.scenario or ["gpu", "cpu"]:
        plan = load_plan(SCENARIOS[name].plan)
        repeats = args.repeats or plan.repeats
        print(f"{name}: plan {plan.name}, {repeats} repeat(s) per run, levels {plan.sweep.levels}")
        for label, slowdown, n in (("A/A", 0.0, args.trials), ("10% slower", 0.10, args.trials // 2),
                                   ("20% slower", 0.20, args.trials // 2), ("2x slower", 1.0, args.trials // 2)):
            start = time.monotonic()
            c = trials(name, n, slowdown, repeats, args.seed)
            print(f"  {label:11s} n={n:4d}: {_rates(c, n)}  ({time.monotonic() - start:.1f}s)")
            if slowdown == 0.0:
                worst_aa = max(worst_aa, c[Outcome.FAIL] / n)
    print(f"worst A/A false-fail rate: {worst_aa:.2%} (must be <= 1%)")
    return 0 if worst_aa <= 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
