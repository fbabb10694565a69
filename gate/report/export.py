"""`gate export`: results.json in other tools' formats.

- vllm-bench: one cell the way `vllm bench serve --save-result` writes it, so existing
  dashboards and scripts can read the gate's figures.
- benchmark-action: github-action-benchmark's custom JSON (`customBiggerIsBetter` or
  `customSmallerIsBetter` list of {name, unit, value}).
"""

from __future__ import annotations

from gate.core.errors import GateError
from gate.measure.results import CellKey, CellSummary, Results


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
        label = c.key.label
        bigger.append({"name": f"{label} output throughput", "unit": "tok/s",
                       "value": round(c.output_throughput, 3)})
        if c.phase == "drain":
            bigger.append({"name": f"{label} requests per minute", "unit": "req/min",
                           "value": round(c.requests_per_min, 3)})
        if c.tpot_ms:
            smaller.append({"name": f"{label} TPOT p50", "unit": "ms",
                            "value": round(c.tpot_ms.p50, 3)})
    return [{"biggerIsBetter": bigger}, {"smallerIsBetter": smaller}]


def select_cell(results: Results, label: str | None) -> CellSummary:
    """The cell with this label (`sweep guided c=8 r1`; the repeat may be left out), or the
    first repeat's drain when no label is given."""
    index = results.index()
    if label is None:
        drains = sorted(index.cells_of("drain"), key=lambda c: c.repeat)
        if drains:
            return drains[0]
    else:
        found = index.cell(CellKey.parse(label))
        if found is not None:
            return found
    labels = [c.key.label for c in results.cells]
    raise GateError(f"no cell {label or 'drain'!r} in the results; cells: {', '.join(labels) or 'none'}")
