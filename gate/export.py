"""`gate export`: results.json in other tools' formats.

- vllm-bench: one cell the way `vllm bench serve --save-result` writes it, so existing
  dashboards and scripts can read the gate's figures.
- benchmark-action: github-action-benchmark's custom JSON (`customBiggerIsBetter` or
  `customSmallerIsBetter` list of {name, unit, value}).
"""

from __future__ import annotations

import json
from pathlib import Path

from gate.errors import GateError
from gate.results import CellSummary, Results, load_results, write_atomic


def vllm_bench(results: Results, cell: CellSummary) -> dict:
    out: dict = {
        "date": results.created_at,
        "backend": "openai-chat",
        "model_id": results.server.model,
        "max_concurrency": cell.concurrency,
        "num_prompts": cell.requests,
        "duration": cell.duration_s,
        "completed": cell.completed,
        "failed": cell.failed,
        "total_output_tokens": cell.total_output_tokens,
        "request_throughput": cell.request_throughput,
        "output_throughput": cell.output_throughput,
    }
    for metric in ("ttft", "tpot", "itl", "e2el"):
        d = getattr(cell, f"{metric}_ms")
        if d is None:
            continue
        out[f"mean_{metric}_ms"] = d.mean
        out[f"median_{metric}_ms"] = d.p50
        out[f"std_{metric}_ms"] = d.std
        out[f"p90_{metric}_ms"] = d.p90
        out[f"p99_{metric}_ms"] = d.p99
    out["gate"] = {"phase": cell.phase, "arm": cell.arm, "repeat": cell.repeat,
                   "plan": results.plan.name, "plan_hash": results.plan_hash}
    return out


def benchmark_action(results: Results) -> list[dict]:
    """Throughputs (bigger is better) and latencies (smaller is better) as separate lists is
    what github-action-benchmark wants; we emit both tool formats' entries together with the
    `tool` they belong to in the name, and the caller picks a list."""
    bigger, smaller = [], []
    for c in results.cells:
        tag = "drain" if c.phase == "drain" else f"c{c.concurrency} {c.arm}"
        rep = f" r{c.repeat + 1}" if results.plan.repeats > 1 else ""
        bigger.append({"name": f"{tag}{rep} output throughput", "unit": "tok/s",
                       "value": round(c.output_throughput, 3)})
        if c.phase == "drain":
            bigger.append({"name": f"drain{rep} requests per minute", "unit": "req/min",
                           "value": round(c.requests_per_min, 3)})
        if c.tpot_ms:
            smaller.append({"name": f"{tag}{rep} TPOT p50", "unit": "ms",
                            "value": round(c.tpot_ms.p50, 3)})
    return [{"biggerIsBetter": bigger}, {"smallerIsBetter": smaller}]


def select_cell(results: Results, spec: str) -> CellSummary:
    """`drain`, or `c8-guided` / `c8-free` (first repeat unless `:rN`)."""
    key, _, rep = spec.partition(":r")
    repeat = int(rep) - 1 if rep else 0
    for c in results.cells:
        if c.key == key and c.repeat == repeat:
            return c
    keys = sorted({c.key for c in results.cells})
    raise GateError(f"no cell {spec!r} in the results; cells: {', '.join(keys) or 'none'}")


def register(sub) -> None:
    p = sub.add_parser("export", help="write results in vllm-bench or benchmark-action format")
    p.add_argument("results", help="results.json (or its folder)")
    p.add_argument("--format", choices=["vllm-bench", "benchmark-action"], required=True)
    p.add_argument("--cell", default="drain", help="vllm-bench: drain, c8-guided, c8-free[:rN]")
    p.add_argument("--direction", choices=["bigger", "smaller"], default="bigger",
                   help="benchmark-action: which list (customBiggerIsBetter or ...Smaller...)")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=main)


def main(args) -> int:
    results = load_results(args.results)
    if args.format == "vllm-bench":
        data = vllm_bench(results, select_cell(results, args.cell))
    else:
        lists = benchmark_action(results)
        data = lists[0]["biggerIsBetter"] if args.direction == "bigger" else lists[1]["smallerIsBetter"]
    write_atomic(args.out, json.dumps(data, indent=2))
    print(f"wrote {args.out}")
    return 0
