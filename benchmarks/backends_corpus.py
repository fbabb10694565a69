"""The schema corpus on each installed structured-output backend (cpu-corpus plan): one real
`vllm serve` per backend, then per backend the schemas drawn and left out (and why), their
mean compile cost measured offline, guided/free TPOT and TTFT per level, the wait for the
grammar from vLLM's own histograms, and every guided output's validity, with the schema of
each invalid or cut output named.

Run under the machine-wide lock (it starts one server per backend, several minutes each):

    flock /tmp/gate-vllm.lock .venv/bin/python benchmarks/backends_corpus.py --out /tmp/corpus-run

Figures measured while others use the machine are not measurements; say so when quoting them.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

from gate.flows.backends import load_index
from gate.measure.results import Results, load_results
from gate.plan.corpus import AUTO_BACKEND, draw, left_out, load_corpus, pool
from gate.plan.spec import load_plan
from gate.plan.workload import GuidedLoad

REPO = Path(__file__).resolve().parents[1]


def measure(plan: str, backends: str, out: Path) -> int:
    cmd = [sys.executable, "-m", "gate.cli", "run", "--plan", plan, "--backends", backends,
           "--out", str(out), "--quiet"]
    return subprocess.run(cmd, cwd=REPO).returncode


def med(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def fmt(x: float | None, unit: str = "") -> str:
    return "-" if x is None else f"{x:.1f}{unit}"


def arm_p50(results: Results, arm: str, level: int, figure: str) -> float | None:
    dists = [getattr(c, figure) for c in results.cells_of("sweep", arm, level)]
    return med([d.p50 for d in dists if d is not None])


def schema_problems(results: Results, load: GuidedLoad) -> Counter:
    """Invalid or length-cut guided outputs per schema id (the unique arm's variants count
    under the schema they vary)."""
    found: Counter = Counter()
    for r in results.records:
        if r.arm == "free" or not load.drawn:
            continue
        if r.json_valid is False or r.finish_reason == "length":
            found[f"{load.drawn[r.index % len(load.drawn)].id}: "
                  f"{r.validation_error or r.finish_reason}"[:160]] += 1
    return found


def describe(backend: str, results: Results) -> list[str]:
    plan = results.plan
    spec = plan.workload.corpus
    assert spec is not None
    corpus = load_corpus(spec.file)
    drawn = draw(corpus, spec, backend)
    name = AUTO_BACKEND if backend == "auto" else backend
    load = GuidedLoad.for_backend(plan.workload, backend)
    guided = [r for r in results.records if r.arm != "free" and r.phase != "warmup"]
    valid = sum(1 for r in guided if r.json_valid)
    lines = [
        f"== {backend} ({results.status}) ==",
        f"schemas: {len(drawn)} drawn of {len(pool(corpus, spec, backend))} it can serve; "
        f"{len(left_out(corpus, spec, backend))} left out for {backend} (unsupported or over "
        f"max_compile_ms), {len(corpus.dropped)} dropped before compiling (gate corpus show "
        "lists them all, with why)",
        f"offline compile cost of the drawn schemas: mean "
        f"{statistics.mean(s.compile_ms[name] for s in drawn):.1f} ms, max "
        f"{max(s.compile_ms[name] for s in drawn):.1f} ms",
        f"valid guided outputs: {valid}/{len(guided)}",
    ]
    for level in sorted({c.concurrency for c in results.cells_of("sweep")}):
        g_tpot, f_tpot = (arm_p50(results, a, level, "tpot_ms") for a in ("guided", "free"))
        g, u, f = (arm_p50(results, a, level, "ttft_ms") for a in ("guided", "unique", "free"))
        queue = {a: med([c.server_times.queue_ms for c in results.cells_of("sweep", a, level)
                         if c.server_times and c.server_times.queue_ms is not None])
                 for a in ("guided", "unique", "free")}
        wait = {a: None if queue[a] is None or queue["free"] is None else queue[a] - queue["free"]
                for a in ("guided", "unique")}
        lines.append(
            f"c={level}: TPOT p50 guided {fmt(g_tpot, ' ms')} / free {fmt(f_tpot, ' ms')} = "
            f"{fmt(g_tpot / f_tpot if g_tpot and f_tpot else None, 'x')}; TTFT p50 guided "
            f"{fmt(g, ' ms')}, unique schemas {fmt(u, ' ms')}, free {fmt(f, ' ms')}; wait for "
            f"the grammar (vLLM queue beyond free): guided {fmt(wait['guided'], ' ms')}, "
            f"unique {fmt(wait['unique'], ' ms')}")
    for problem, count in schema_problems(results, load).most_common():
        lines.append(f"  invalid or cut x{count}: {problem}")
    return lines + [f"errors: {e}" for e in results.errors[:5]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default="cpu-corpus")
    parser.add_argument("--backends", help="default: the plan's")
    parser.add_argument("--out", type=Path, default=Path("/tmp/gate-backends-corpus"))
    parser.add_argument("--no-run", action="store_true", help="only read an earlier --out")
    args = parser.parse_args()
    backends = args.backends or ",".join(load_plan(args.plan).backends)
    if not args.no_run:
        print(f"gate run --plan {args.plan} --backends {backends}: exit "
              f"{measure(args.plan, backends, args.out)}")
    for entry in load_index(args.out).backends:
        print("\n".join(describe(entry.backend, load_results(args.out / entry.dir))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
