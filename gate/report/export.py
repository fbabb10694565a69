"""`gate export`: results.json in other tools' formats.

- vllm-bench: one cell the way `vllm bench serve --save-result` writes it, so existing
  dashboards and scripts can read the gate's figures.
- benchmark-action: github-action-benchmark's custom JSON (`customBiggerIsBetter` or
  `customSmallerIsBetter` list of {name, unit, value}).
- pytorch-v3: the PyTorch HUD's benchmark records (schema v3, one record per metric, the
  figure of every repeat in `benchmark_values`), what pytorch-integration-testing's
  upload_benchmark_results.py sends to the HUD's database (it adds the build's metadata).
- bencher: Bencher Metric Format (BMF): {benchmark: {measure: {value, lower_value,
  upper_value}}}, the geometric mean of the repeats and their smallest and largest.

Both of the last read the checks the gate judges (gate.judge.checks), so a HUD or Bencher
series is the same figure as the gate's verdict and history.
"""

from __future__ import annotations

import math
import re

from gate.core.errors import GateError
from gate.judge.checks import per_repeat, ratio_slots, slots
from gate.judge.noise import runner_key
from gate.measure.results import CellKey, CellSummary, Results
from gate.plan.spec import Plan


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


HUD_BENCHMARK = "vLLM structured-output gate"


def _model_name(plan: Plan, results: Results) -> str:
    return plan.server.model or results.server.model


def pytorch_v3(results: Results) -> list[dict]:
    """One HUD v3 record per measured check; every extra_info value is a string (the table
    stores them as Map(String, String))."""
    fp, plan = results.fingerprint, results.plan
    gpus = sorted({g.name for g in fp.gpus})
    gpu_mib = sum(g.memory_total_mib or 0 for g in fp.gpus)
    runner = {
        "name": runner_key(fp), "type": fp.hardware_key, "cpu_info": fp.cpu_model,
        "cpu_count": int(fp.host_cores), "mem_info": "", "avail_mem_in_gb": 0,
        "gpu_info": " + ".join(gpus), "gpu_count": len(fp.gpus), "gpu_mem_info": "",
        "avail_gpu_mem_in_gb": int(gpu_mib / 1024), "extra_info": {
            "torch_threads": str(fp.torch_threads or "")}}
    records = []
    for slot in slots(results) + ratio_slots(results, plan.thresholds):
        values = list(per_repeat(results, slot).values())
        if not values:
            continue
        records.append({
            "benchmark": {"name": HUD_BENCHMARK, "mode": "inference", "dtype": "",
                          "extra_info": {"plan": plan.name, "plan_hash": results.plan_hash,
                                         "backend": plan.backend,
                                         "gate_version": results.gate_version}},
            "model": {"name": _model_name(plan, results), "type": "", "backend": "vllm",
                      "origins": [], "extra_info": {}},
            "metric": {"name": slot.name, "benchmark_values": values, "target_value": 0.0,
                       "extra_info": {"label": slot.label, "unit": slot.metric.unit,
                                      "direction": slot.metric.direction,
                                      "concurrency": str(slot.concurrency)}},
            "dependencies": {"vllm": {"repo": "vllm-project/vllm", "branch": "",
                                      "sha": fp.vllm_commit or "",
                                      "version": fp.vllm_version or "", "extra_info": {}}},
            "runners": [runner],
        })
    return records


def measure_slug(unit: str) -> str:
    """A Bencher measure from a check's unit: req/min -> req-per-min, ms -> ms, x -> ratio."""
    if unit == "x":
        return "ratio"
    return re.sub(r"[^a-z0-9]+", "-", unit.lower().replace("/", "-per-")).strip("-") or "value"


def bencher_bmf(results: Results) -> dict[str, dict[str, dict[str, float]]]:
    plan = results.plan
    out: dict[str, dict[str, dict[str, float]]] = {}
    for slot in slots(results) + ratio_slots(results, plan.thresholds):
        values = list(per_repeat(results, slot).values())
        if not values:
            continue
        mean = math.exp(sum(math.log(v) for v in values) / len(values))
        out[f"{plan.name}/{slot.name}"] = {measure_slug(slot.metric.unit): {
            "value": mean, "lower_value": min(values), "upper_value": max(values)}}
    return out
