"""gate.report.export: results.json in the formats of `vllm bench serve --save-result` and
github-action-benchmark, and the choice of the exported cell."""

from __future__ import annotations

import pytest
from support import factories as f

from gate.core.errors import GateError
from gate.report.export import benchmark_action, select_cell, vllm_bench

# The keys `vllm bench serve --save-result` writes that the gate fills (docs/results-schema.md).
VLLM_BENCH_KEYS = {
    "date", "backend", "model_id", "max_concurrency", "num_prompts", "duration", "completed",
    "failed", "total_output_tokens", "request_throughput", "output_throughput",
    *(f"{stat}_{metric}_ms" for metric in ("ttft", "tpot", "itl", "e2el")
      for stat in ("mean", "median", "std", "p90", "p99")),
}


def two_repeats():
    cells = [f.cell("drain", "guided", 64, 1, rpm=230.0),
             f.cell("drain", "guided", 64, 0, rpm=233.0),
             f.cell("sweep", "guided", 8, 0, tpot_p50=15.0), f.cell("sweep", "free", 8, 0)]
    return f.make_results(cells)


def test_vllm_bench_uses_vllm_bench_serve_names_and_the_cells_figures():
    results = two_repeats()
    cell = results.cells[2]
    out = vllm_bench(results, cell)
    assert set(out) == VLLM_BENCH_KEYS | {"gate"}
    assert out["max_concurrency"] == 8 and out["num_prompts"] == cell.requests
    assert out["median_tpot_ms"] == 15.0 and out["p99_tpot_ms"] == cell.tpot_ms.p99
    assert out["request_throughput"] == cell.request_throughput  # requests/s, as vllm bench
    assert out["model_id"] == "gate-model" and out["date"] == f.CREATED_AT
    assert out["gate"] == {"phase": "sweep", "arm": "guided", "repeat": 0,
                           "plan": results.plan.name, "plan_hash": results.plan_hash}


def test_vllm_bench_leaves_out_a_metric_the_cell_has_no_figures_for():
    results = two_repeats()
    cell = results.cells[3].model_copy(update={"itl_ms": None})
    out = vllm_bench(results, cell)
    assert not any("_itl_" in key for key in out) and "median_ttft_ms" in out


def test_benchmark_action_splits_throughputs_from_latencies():
    bigger, smaller = benchmark_action(two_repeats())
    assert set(bigger) == {"biggerIsBetter"} and set(smaller) == {"smallerIsBetter"}
    names = [e["name"] for e in bigger["biggerIsBetter"]]
    assert "drain guided c=64 r1 requests per minute" in names
    assert "sweep free c=8 r1 output throughput" in names
    assert not any("requests per minute" in n for n in names if n.startswith("sweep"))
    tpot = {e["name"]: e for e in smaller["smallerIsBetter"]}
    assert tpot["sweep guided c=8 r1 TPOT p50"] == {"name": "sweep guided c=8 r1 TPOT p50",
                                                     "unit": "ms", "value": 15.0}


def test_benchmark_action_rounds_to_three_decimals():
    results = f.make_results([f.cell("drain", "guided", 64, rpm=233.33333)])
    (rate,) = [e for e in benchmark_action(results)[0]["biggerIsBetter"] if e["unit"] == "req/min"]
    assert rate["value"] == 233.333


def test_without_a_label_the_first_repeats_drain_is_exported():
    cell = select_cell(two_repeats(), None)
    assert (cell.phase, cell.repeat, cell.requests_per_min) == ("drain", 0, pytest.approx(233.0))


@pytest.mark.parametrize("label", ["sweep free c=8", "sweep free c=8 r1"])
def test_a_label_names_a_cell_with_or_without_its_repeat(label):
    cell = select_cell(two_repeats(), label)
    assert (cell.phase, cell.arm, cell.concurrency, cell.repeat) == ("sweep", "free", 8, 0)


def test_a_missing_cell_is_an_error_listing_the_cells_there_are():
    with pytest.raises(GateError, match=r"no cell 'sweep free c=99'.*sweep guided c=8 r1"):
        select_cell(two_repeats(), "sweep free c=99")
    sweep_only = f.make_results([f.cell("sweep", "guided", 8)])
    with pytest.raises(GateError, match="no cell 'drain'"):
        select_cell(sweep_only, None)
