"""`gate doctor` as a real subprocess on fixture trees of /proc and cgroups: exit codes,
--strict, --json, and clear errors for bad input."""

from __future__ import annotations

import pytest
from support.cli import gate_subprocess
from support.paths import FIXTURES
from support.trees import fake_process, write

from gate.core.errors import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_PASS
from gate.runner.doctor import DoctorReport

LOGS = FIXTURES / "doctor"


@pytest.mark.parametrize("layout", ["v1", "v2"])
def test_cli_under_a_cgroup_fixture_reports_oversubscription(tmp_path, layout):
    """The real probe of this interpreter's torch (at least 1 thread) under a half-CPU quota."""
    cg = tmp_path / "cg"
    if layout == "v2":
        write(cg, "cpu.max", "50000 100000\n")
    else:
        write(cg, "cpu/cpu.cfs_quota_us", "50000\n")
        write(cg, "cpu/cpu.cfs_period_us", "100000\n")
    out = tmp_path / "doctor.json"
    strict = gate_subprocess("doctor", "--cgroup-root", cg, "--strict", "--json", "--out", out)
    assert strict.returncode == EXIT_ERROR, strict.stderr
    report = DoctorReport.model_validate_json(strict.stdout)
    assert DoctorReport.model_validate_json(out.read_text()) == report
    (over,) = report.invalidating
    assert over.id == "cpu.quota_oversubscribed" and "OMP_NUM_THREADS=1" in over.fix
    assert f"cgroup v{layout[1]} quota of 0.5 CPUs" in over.detail
    lenient = gate_subprocess("doctor", "--cgroup-root", cg)
    assert lenient.returncode == EXIT_PASS, lenient.stderr
    assert "[invalidating] cpu.quota_oversubscribed" in lenient.stdout
    assert "fix: set OMP_NUM_THREADS=1" in lenient.stdout


def test_cli_on_a_healthy_fixture_exits_0_even_when_strict(tmp_path):
    write(tmp_path, "cg/cpu.max", "max 100000\n")
    proc = gate_subprocess("doctor", "--cgroup-root", tmp_path / "cg", "--no-probe", "--strict",
                           "--json")
    assert proc.returncode == EXIT_PASS, proc.stderr
    report = DoctorReport.model_validate_json(proc.stdout)
    assert not report.invalidating and {"gpu.none", "disk.free"} <= {f.id for f in report.findings}


def test_cli_reads_a_server_from_a_proc_fixture(tmp_path):
    proc_root = tmp_path / "proc"
    fake_process(proc_root, 8740, 1, "python -m vllm.entrypoints.openai.api_server", "0", 7)
    fake_process(proc_root, 8831, 8740, "VLLM::EngineCore", "0", 13, states="R")
    fake_process(proc_root, 8842, 8831, "VLLM::Worker", "0", 47, states="RR")
    write(proc_root, "8740/limits", "Max locked memory         65536  65536  bytes\n")
    proc = gate_subprocess("doctor", "--server-pid", "8740",
                           "--server-log", LOGS / "taskset_c0_omp4.log", "--proc-root", proc_root,
                           "--cgroup-root", tmp_path / "cg", "--no-probe", "--sample-s", "0.1",
                           "--strict", "--json")
    assert proc.returncode == EXIT_ERROR, proc.stderr
    report = DoctorReport.model_validate_json(proc.stdout)
    assert report.server_pid == 8740
    found = {f.id: f for f in report.findings}
    assert "OMP_NUM_THREADS=1" in found["server.torch_pool_oversubscribed"].fix
    assert "3 threads" in found["server.busy_threads_oversubscribed"].title
    assert "0.0625 MiB" in found["memory.memlock"].title  # the server's limit, not ours
    assert found["vllm.version"].title.endswith("V1 model runner")


@pytest.mark.parametrize("args, message", [
    (["--server-pid", "999999999"], "no process with pid 999999999"),
    (["--server-log", "/nonexistent/server.log"], "server log /nonexistent/server.log"),
    (["--sample-s", "-1"], "--sample-s and --min-free-gib must not be negative"),
])
def test_cli_bad_input_is_a_clear_error(args, message):
    proc = gate_subprocess("doctor", "--no-probe", *args)
    assert proc.returncode == EXIT_BAD_INPUT
    assert f"gate: error: {message}" in proc.stderr and "Traceback" not in proc.stderr
