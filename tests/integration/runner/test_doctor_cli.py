"""`gate doctor` as a real subprocess on fixture trees of /proc and cgroups, and on a running
stand-in server: exit codes, --strict, --json, and clear errors for bad input."""

from __future__ import annotations

import os
import sys

import pytest
from support.cli import gate_subprocess
from support.paths import FIXTURES
from support.trees import fake_process, write
from support.vllm_helpers import running_stand_in

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


def test_cli_finds_a_live_server_pinned_to_one_cpu_oversubscribed(tmp_path):
    """A running stand-in server (support/fake_vllm.py) pinned to CPU 0 with
    OMP_NUM_THREADS=4: its engine core logs the torch pool vLLM leaves it (2: torch caps the
    variable at the host's cores) and runs on one CPU; the doctor reads both, from the real
    /proc and the log the server writes to."""
    assert (os.cpu_count() or 1) >= 2, "needs 2+ cores: torch caps OMP_NUM_THREADS at them"
    pinned = {"launch": "command", "env": {"OMP_NUM_THREADS": "4"},
              "command": ["taskset", "-c", "0", sys.executable, "-m", "vllm.entrypoints.cli.main",
                          "serve"]}
    with running_stand_in(tmp_path, **pinned) as server:
        proc = gate_subprocess("doctor", "--server-pid", str(server.pid), "--strict", "--no-probe",
                               "--out", tmp_path / "d.json")
    assert proc.returncode == EXIT_ERROR, proc.stdout + proc.stderr
    report = DoctorReport.model_validate_json((tmp_path / "d.json").read_text())
    found = {f.id: f for f in report.findings}
    over = found["server.torch_pool_oversubscribed"]
    assert "OMP_NUM_THREADS=1" in over.fix and "fix: set OMP_NUM_THREADS=1" in proc.stdout
    assert "VLLM::EngineCore" in over.detail and "leaving Torch threads at 2" in over.detail
    table = found["server.processes"].detail.splitlines()
    assert len(table) == 2 and all(": CPUs 0," in line for line in table)  # read from /proc
    assert report.served.vllm_version == "0.0.0+standin"


@pytest.mark.parametrize("args, message", [
    (["--server-pid", "999999999"], "no process with pid 999999999"),
    (["--server-log", "/nonexistent/server.log"], "server log /nonexistent/server.log"),
    (["--sample-s", "-1"], "--sample-s and --min-free-gib must not be negative"),
])
def test_cli_bad_input_is_a_clear_error(args, message):
    proc = gate_subprocess("doctor", "--no-probe", *args)
    assert proc.returncode == EXIT_BAD_INPUT
    assert f"gate: error: {message}" in proc.stderr and "Traceback" not in proc.stderr


# ---- on a GPU runner: a recorded nvidia-smi on PATH -------------------------------------------

GPU_ROW = ("0, GPU-3f2a, NVIDIA H100 80GB HBM3, 550.54.15, Enabled, 1980, 1980, "
           "0x0000000000000000, 70500, 81559\n")


def fake_nvidia_smi(tmp_path, apps: str) -> dict:
    """A nvidia-smi that prints recorded CSV: the GPU for --query-gpu, `apps` for
    --query-compute-apps (their PIDs the host's, as nvidia-smi inside a container prints
    them). The environment that puts it first on PATH."""
    bin_dir = tmp_path / "bin"
    write(tmp_path, "gpus.csv", GPU_ROW)
    write(tmp_path, "apps.csv", apps)
    write(bin_dir, "nvidia-smi",
          "#!/bin/sh\ncase \"$1\" in\n"
          f"  --query-gpu=*) cat '{tmp_path / 'gpus.csv'}' ;;\n"
          f"  --query-compute-apps=*) cat '{tmp_path / 'apps.csv'}' ;;\n"
          "  *) exit 2 ;;\nesac\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def container_proc(tmp_path):
    """/proc inside a container: the server is pid 87 there (host pid 4242, which this /proc
    cannot show), its engine core holds /dev/nvidia0; the PID namespace is not the host's."""
    proc_root = tmp_path / "proc"
    fake_process(proc_root, 87, 1, "python -c vllm serve", "0-3", 7)
    fake_process(proc_root, 90, 87, "VLLM::EngineCore", "0-3", 40,
                 fds=("/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm"))
    (proc_root / "self" / "ns").mkdir(parents=True)
    (proc_root / "self" / "ns" / "pid").symlink_to("pid:[4026532871]")
    return proc_root


@pytest.mark.parametrize(("apps", "want"), [
    ("GPU-3f2a, 4242, VLLM::EngineCore, 69000\n", "gpu.processes_matched"),
    ("GPU-3f2a, 4242, VLLM::EngineCore, 69000\nGPU-3f2a, 5150, python3, 1200\n",
     "gpu.other_processes"),
])
def test_cli_in_a_container_tells_the_servers_gpu_process_from_anothers(tmp_path, apps, want):
    env = fake_nvidia_smi(tmp_path, apps)
    proc = gate_subprocess("doctor", "--server-pid", "87", "--server-log", str(FIXTURES / "server_logs" / "gpu_v2.log"),
                "--proc-root", str(container_proc(tmp_path)), "--cgroup-root",
                str(tmp_path / "cg"), "--no-probe", "--sample-s", "0", "--json", env=env)
    assert proc.returncode == EXIT_PASS, proc.stderr
    report = DoctorReport.model_validate_json(proc.stdout)
    found = {f.id: f for f in report.findings}
    assert found["gpu.state"].title == "GPU 0 (NVIDIA H100 80GB HBM3)"
    assert "host's PIDs" in found[want].detail
    severity = "info" if want == "gpu.processes_matched" else "invalidating"
    assert found[want].severity.value == severity
    assert report.served.model_runner == "v2" and report.served.vllm_version == "0.33.0"
    assert found["vllm.version"].title == "vLLM 0.33.0, V2 model runner"


def test_cli_on_a_gpu_runner_judges_the_threads_vllm_serves_with(tmp_path):
    """A 1.5-CPU quota under which this 2-core machine's fresh torch pool (2 threads) is
    oversubscribed: on a GPU runner this interpreter's vLLM sets its GPU worker to one thread,
    so no finding."""
    assert (os.cpu_count() or 1) >= 2, "needs 2+ cores for torch's default pool of 2"
    write(tmp_path, "cg/cpu.max", "150000 100000\n")
    env = fake_nvidia_smi(tmp_path, "")
    proc = gate_subprocess("doctor", "--cgroup-root", str(tmp_path / "cg"), "--json", env=env)
    report = DoctorReport.model_validate_json(proc.stdout)
    found = {f.id: f for f in report.findings}
    assert "cpu.quota_oversubscribed" not in found, found.get("cpu.quota_oversubscribed")
    assert found["cpu.threads"].title == "torch threads 1 fit 1.5 CPUs"
    assert "reduced to 1 thread for serving" in found["cpu.threads"].detail
    omp = gate_subprocess("doctor", "--cgroup-root", str(tmp_path / "cg"), "--json",
               env={**env, "OMP_NUM_THREADS": "2"})
    ids = {f.id for f in DoctorReport.model_validate_json(omp.stdout).findings}
    assert "cpu.quota_oversubscribed" in ids  # set by hand: vLLM leaves it, and it is judged
