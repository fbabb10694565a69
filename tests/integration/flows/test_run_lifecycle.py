"""`gate run` as a real subprocess against the stand-in server (support/fake_vllm.py), for
what is the gate's own behaviour around a server, whatever serves:

- a run the gate starts its server for: progress lines, the summary, where the time went, the
  server launched as `vllm serve` and gone afterwards (its engine core child too), exports that
  match the results;
- a SIGTERM during the server's start-up (a cancelled CI job) stops its whole process group;
- a server that dies in the middle of a drain, or before it is healthy (corrupt weights: the
  log's last lines said), makes an error, never a pass, with no traceback of the gate's; so
  does one that holds its output back (streams that arrive in one piece are not decode speed);
- a server the gate did not start, measured by URL: vLLM's own `structured_outputs` field and
  a unique schema per request; a request field the server ignores (the removed guided_json)
  makes the run an error.

What only a real vLLM shows about the same runs (whole streams, the runner it falls back to,
its processes) is tests/e2e/test_e2e_run.py's, on the README's own run.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from support.cli import gate_command, gate_env, gate_in_process, gate_subprocess
from support.paths import REPO_ROOT
from support.vllm_helpers import (
    group_gone,
    running_stand_in,
    server_processes,
    stand_in_plan,
    wait_gone,
)

from gate.core.errors import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_PASS
from gate.measure.results import CellKey, load_results
from gate.plan import workload


@pytest.fixture(scope="module")
def stand_in_run(tmp_path_factory):
    """One `gate run` on the stand-in: (process, out folder, marker)."""
    tmp = tmp_path_factory.mktemp("run")
    plan, marker = stand_in_plan(tmp)
    proc = gate_subprocess("run", "--plan", str(plan), "--out", str(tmp / "out"), timeout=300)
    return proc, tmp / "out", marker


def test_the_run_shows_its_progress_and_leaves_no_process(stand_in_run):
    proc, out, marker = stand_in_run
    assert proc.returncode == EXIT_PASS, proc.stderr[-3000:]
    results = load_results(out / "results.json")
    assert results.status == "complete" and results.errors == []
    assert results.server.started_by_gate and results.server.exit_code is not None
    assert wait_gone(marker, timeout=5) == []  # the server and its engine core
    # launched as `vllm serve` (the build's CLI entry point run by the build's interpreter)
    assert results.server.command[1] == "-c" and "serve" in results.server.command
    assert results.fingerprint.vllm_version == "0.0.0+standin"  # the build that served
    # Progress shows server start and every cell with counts and elapsed time.
    assert "server healthy after" in proc.stderr
    drain = results.cell(CellKey("drain", "guided", results.plan.drain.concurrency))
    assert f"head drain guided c={drain.concurrency} r1: {drain.completed}/{drain.requests} ok" \
        in proc.stderr
    assert "head sweep free c=4 r1:" in proc.stderr
    # The summary table and where the time went.
    assert "TPOT p50 ms" in proc.stdout and "where the time went: total" in proc.stdout
    assert {"startup_s", "warmup_s", "drain_s", "sweep_s", "total_s"} <= set(results.timings_s)


def test_exports_match_the_results(stand_in_run, tmp_path):
    _, out, _ = stand_in_run
    results = load_results(out / "results.json")
    cell = results.cell(CellKey("sweep", "guided", 4))
    dst = tmp_path / "bench.json"
    proc = gate_in_process("export", out, "--format", "vllm-bench", "--cell", "sweep guided c=4",
                           "--out", dst)
    assert proc.returncode == 0, proc.stderr
    bench = json.loads(dst.read_text())
    assert bench["completed"] == cell.completed and bench["max_concurrency"] == 4
    assert bench["median_tpot_ms"] == pytest.approx(cell.tpot_ms.p50)
    assert bench["p99_itl_ms"] == pytest.approx(cell.itl_ms.p99)
    assert bench["output_throughput"] == pytest.approx(cell.output_throughput)
    dst2 = tmp_path / "ba.json"
    assert gate_in_process("export", out, "--format", "benchmark-action", "--out",
                           dst2).returncode == 0
    entries = {e["name"]: e for e in json.loads(dst2.read_text())}
    drain = results.cell(CellKey("drain", "guided", results.plan.drain.concurrency))
    assert entries[f"{drain.key.label} requests per minute"]["value"] == pytest.approx(
        drain.requests_per_min, rel=1e-3)
    bad = gate_in_process("export", out, "--format", "vllm-bench", "--cell", "sweep free c=99",
                          "--out", dst)
    assert bad.returncode == EXIT_BAD_INPUT and "no cell 'sweep free c=99'" in bad.stderr
    worse = gate_in_process("export", out, "--format", "vllm-bench", "--cell", "c4-free",
                            "--out", dst)
    assert worse.returncode == EXIT_BAD_INPUT and "not a cell label" in worse.stderr


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


def test_sigterm_during_the_servers_start_up_stops_its_whole_group(tmp_path):
    """A cancelled CI job sends SIGTERM: the server (still starting: it listens only after a
    minute) and its engine core go too."""
    plan, marker = stand_in_plan(tmp_path, **{"server.env.FAKE_VLLM_START_S": "60"})
    proc = subprocess.Popen(gate_command("run", "--plan", plan, "--out", tmp_path / "out"),
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=gate_env())
    try:
        _wait_for_line(proc, "starting vllm serve", 60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            processes = server_processes(marker)
            titles = [" ".join(p.cmdline()) for p in processes]
            if any(t.startswith("VLLM::EngineCore") for t in titles):
                break
            time.sleep(0.1)
        assert any(t.startswith("VLLM::EngineCore") for t in titles), titles
        group = os.getpgid(processes[0].pid)  # the server leads its own process group
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    except BaseException:  # a failing test leaves neither the gate nor its server behind
        proc.kill()
        for left in server_processes(marker):
            with contextlib.suppress(psutil.NoSuchProcess):
                left.kill()
        raise
    finally:
        proc.communicate()
    assert wait_gone(marker) == []
    assert group_gone(group), "a process of the server's group outlived the gate"


def test_a_server_that_dies_in_the_middle_of_a_drain_is_an_error(tmp_path):
    """The stand-in kills itself (SIGKILL, as the OOM killer would) at its 200th request, well
    into a drain of 4000."""
    plan, marker = stand_in_plan(tmp_path, **{"drain.requests": 4000, "drain.concurrency": 16,
                                              "server.env.FAKE_VLLM_EXIT_AFTER": "200"})
    proc = gate_subprocess("run", "--plan", plan, "--out", tmp_path / "out", timeout=300)
    assert proc.returncode == EXIT_ERROR, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "head: warm-up done" in proc.stderr  # it died in the drain, not before
    results = load_results(tmp_path / "out")
    assert results.status == "error"
    assert any("server died" in e or "requests failed" in e for e in results.errors), results.errors
    assert "MEASUREMENT ERRORS" in proc.stdout
    assert wait_gone(marker) == []
    # its engine core outlived the server's SIGKILL: the gate's stop of the group ended it
    leader = re.search(r"\(APIServer pid=(\d+)\)", Path(results.server.log_path).read_text())
    assert leader and group_gone(int(leader.group(1))), "the server's engine core was left"


def test_a_server_that_holds_its_output_back_is_an_error_not_decode_speed(tmp_path):
    """Every stream written in one piece at its end (FAKE_VLLM_HOLD_BACK: more tokens than any
    output has): each cell is measured again, then the run is an error naming the cells."""
    plan, marker = stand_in_plan(tmp_path, **{"sweep.levels": [2], "drain.enabled": False,
                                              "server.env.FAKE_VLLM_HOLD_BACK": "1000"})
    proc = gate_subprocess("run", "--plan", plan, "--out", tmp_path / "out", timeout=300)
    assert proc.returncode == EXIT_ERROR, proc.stderr[-2000:]
    assert "arrived coalesced" in proc.stderr and "measuring it again" in proc.stderr
    results = load_results(tmp_path / "out")
    assert results.status == "error"
    stuck = [e for e in results.errors if "streams stayed coalesced" in e]
    assert {e.split(":")[0] for e in stuck} == {"sweep guided c=2 r1", "sweep free c=2 r1"}
    assert all(c.remeasured == results.plan.sweep.remeasure_coalesced for c in results.cells)
    assert wait_gone(marker) == []


def test_corrupt_weights_kill_the_server_with_its_log_tail(tmp_path):
    folder = tmp_path / "corrupt"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model.safetensors").write_bytes(b"\x00" * 1024)
    plan, marker = stand_in_plan(tmp_path, **{"server.model": str(folder)})
    proc = gate_subprocess("run", "--plan", plan, "--out", tmp_path / "out", timeout=300)
    assert proc.returncode == EXIT_ERROR
    out = proc.stdout + proc.stderr
    assert "before it became healthy; last lines of" in out
    assert "SafetensorError" in out.split("last lines of", 1)[1]  # the server's own words
    assert "Traceback" not in proc.stderr.split("last lines of")[0]
    assert wait_gone(marker) == []
    assert load_results(tmp_path / "out").status == "error"


@pytest.fixture(scope="module")
def running_server(tmp_path_factory):
    with running_stand_in(tmp_path_factory.mktemp("by-url")) as server:
        yield server


def test_measure_running_server_with_structured_outputs_field(running_server, tmp_path):
    """--base-url measures a server started elsewhere; vLLM's own `structured_outputs` field
    and unique schemas per request work too."""
    plan, _ = stand_in_plan(tmp_path, **{"workload.schema_transport": "structured_outputs",
                                         "workload.schema_variants": "unique",
                                         "drain.requests": 16, "sweep.levels": [2]})
    proc = gate_subprocess("run", "--plan", plan, "--base-url", running_server.base_url,
                           "--out", tmp_path / "out", timeout=300)
    assert proc.returncode == EXIT_PASS, proc.stderr[-2000:]
    results = load_results(tmp_path / "out")
    assert not results.server.started_by_gate
    guided = [r for r in results.records if r.arm == "guided" and r.phase != "warmup"]
    assert guided and all(r.json_valid for r in guided)
    # Unique schemas: each output carries its own required key v<index>.
    assert all(f'"v{r.index}"' in r.text for r in guided)
    assert running_server.death() is None  # measuring does not stop a server we did not start


def test_unconstrained_server_output_is_an_error_not_a_pass(running_server, tmp_path,
                                                            monkeypatch):
    """A request field the server ignores (the removed guided_json did that: HTTP 200 with
    free text) must make the run an error, never a pass."""
    plan, _ = stand_in_plan(tmp_path, **{"drain.requests": 4, "sweep.enabled": False,
                                         "warmup.requests": 0})
    original = workload.request_body

    def ignored_field(spec, model, *, prompt, guided, schema, free_max_tokens=None):
        body = original(spec, model, prompt=prompt, guided=False, schema=None)
        body.pop("ignore_eos", None)
        body["guided_json"] = schema  # removed around v0.12: vLLM ignores it
        return body

    monkeypatch.setattr(workload, "request_body", ignored_field)
    proc = gate_in_process("run", "--plan", plan, "--base-url", running_server.base_url,
                           "--out", tmp_path / "out", "--quiet")
    assert proc.returncode == EXIT_ERROR, proc.stderr
    results = load_results(tmp_path / "out")
    assert results.status == "error"
    assert any("do not follow the schema" in e for e in results.errors), results.errors
