"""Is this runner fit to run a job's code? The checks `gate trust check-runner` (and its
stdlib-only twin, scripts/check_runner.py, which the GPU jobs run first) make before any code
under test, and the per-job caches they set up. Standard library only: the check runs as
`python3 -I -S` from the pinned gate checkout, before anything is installed.

A self-hosted runner that ran an earlier job may carry what that job left: files, processes, a
patched toolchain, configuration that later jobs' git and pip obey, and caches that later jobs
execute (a torch.compile / Inductor / Triton cache entry is code; the nightly job on the
default branch would run it). Nothing inside a job can prove the past by itself, so the proof
is split (docs/security.md, "Provisioning a GPU runner"):

- the provisioning, as root, writes a marker for this boot and this runner registration
  (ephemeral, just-in-time: GitHub gives it one job), in a root-owned folder the runner user
  cannot write, and deletes it when the runner exits; the job checks the owner, the modes, the
  boot id and the runner name, that it is not root itself (root could have written the
  marker), and that its runner's log folder shows this job only (a registration reused on the
  same boot shows more);
- no process of the job's user runs outside this job's runner process, and nothing the user
  could have left steers later programs: no git or pip configuration in the home folder, no
  file in a folder on PATH that the user may write, no variable that preloads code;
- the model cache is mounted read-only: no entry in it may be writable by the job's user;
- the compile caches of vLLM, torch and Triton, and the gate's own cache (calibrations, the
  tiny model), point at a folder of this job (created here, refused if it already exists),
  and none is left in their default places from before;
- the cloud's instance metadata service does not answer (it hands out the VM's credentials).

Every check fails closed: a problem found, or a fact that cannot be read, refuses the run.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import socket
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gate.core.errors import EXIT_FAIL, GateError

DEFAULT_MARKER = Path("/etc/perf-gate/fresh-runner.json")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
PROC = Path("/proc")
WORKER = "Runner.Worker"  # the runner's process for one job; the job's steps are its children
DEFAULT_METADATA = ("169.254.169.254:80",)  # AWS, GCP, Azure, OCI: the same link-local address
WRITE_BITS_OTHERS = stat.S_IWGRP | stat.S_IWOTH
MAX_CACHE_ENTRIES = 200_000  # a model cache larger than this is refused unless mounted read-only

# Where vLLM, torch and Triton keep compiled code, each pointed into the job's folder.
COMPILE_CACHE_VARS = {
    "VLLM_CACHE_ROOT": "vllm",
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",
    "TRITON_CACHE_DIR": "triton",
    "CUDA_CACHE_PATH": "nv-compute-cache",
    "TORCH_EXTENSIONS_DIR": "torch-extensions",
    "XDG_CACHE_HOME": "xdg-cache",
    "HF_HOME": "hf-home",
    "GATE_CACHE_DIR": "gate",  # calibrations and the tiny model: the job's own, never shared
}
# Variables that make a later program load code or configuration of someone's choosing.
STEERING_VARS = ("LD_PRELOAD", "LD_AUDIT", "BASH_ENV", "ENV", "PYTHONPATH", "PYTHONHOME",
                 "PYTHONSTARTUP", "PYTHONUSERBASE", "PIP_CONFIG_FILE", "GIT_CONFIG_GLOBAL",
                 "GIT_CONFIG_SYSTEM", "GIT_CONFIG_PARAMETERS", "GIT_EXEC_PATH")
OFFLINE_VARS = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclass(frozen=True)
class JobUser:
    """Who the job runs as: what it could have written, and whom a marker must not be from."""

    uid: int
    gids: frozenset[int]
    home: Path

    @classmethod
    def current(cls) -> JobUser:
        return cls(os.geteuid(), frozenset({os.getegid(), *os.getgroups()}), Path.home())

    def may_write(self, st: os.stat_result) -> bool:
        """Write permission from the mode bits (the owner may always chmod); ACLs aside."""
        if self.uid == 0 or st.st_uid == self.uid or st.st_mode & stat.S_IWOTH:
            return True
        return bool(st.st_gid in self.gids and st.st_mode & stat.S_IWGRP)


@dataclass(frozen=True)
class RunnerMarker:
    """The file the provisioning writes (as root) once per VM: which boot and which runner
    registration it was provisioned for (other keys are ignored)."""

    boot_id: str  # /proc/sys/kernel/random/boot_id at provisioning
    runner_name: str  # the ephemeral registration's runner name
    ephemeral: bool  # registered for one job (--ephemeral or JIT): must be true

    @classmethod
    def parse(cls, text: str) -> RunnerMarker:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        boot, name, ephemeral = data.get("boot_id"), data.get("runner_name"), data.get("ephemeral")
        if not (isinstance(boot, str) and boot and isinstance(name, str) and name
                and ephemeral is True):
            raise ValueError("boot_id, runner_name (strings) and ephemeral: true are needed")
        return cls(boot, name, ephemeral)


@dataclass
class MarkerCheck:
    path: Path
    boot_id: str
    runner_name: str | None
    owner_uid: int = 0


def marker_problems(check: MarkerCheck, user: JobUser) -> list[str]:
    """Why the marker does not prove a fresh runner ([] when it does)."""
    if user.uid == 0 or user.uid == check.owner_uid:
        return [f"the job runs as uid {user.uid}, which could have written the marker itself: "
                "run the runner as an unprivileged user"]
    try:
        st = check.path.lstat()
    except FileNotFoundError:
        return [f"no runner marker at {check.path}: nothing shows that this runner was "
                "provisioned fresh for this job"]
    except OSError as exc:
        return [f"cannot read the runner marker {check.path}: {exc.strerror}"]
    problems = _owner_problems(check.path, st, check.owner_uid, "the runner marker")
    problems += _owner_problems(check.path.parent, check.path.parent.lstat(), check.owner_uid,
                                "the runner marker's folder", allow_root=True)
    if problems:
        return problems
    return _content_problems(check)


def _owner_problems(path: Path, st: os.stat_result, owner: int, what: str,
                    allow_root: bool = False) -> list[str]:
    problems = []
    if stat.S_ISLNK(st.st_mode):
        problems.append(f"{what} {path} is a symlink")
    if st.st_uid != owner and not (allow_root and st.st_uid == 0):
        problems.append(f"{what} {path} is owned by uid {st.st_uid}, not {owner} (the "
                        "provisioning): the runner user could have written it")
    if st.st_mode & WRITE_BITS_OTHERS:
        problems.append(f"{what} {path} is writable by group or others "
                        f"(mode {stat.S_IMODE(st.st_mode):o})")
    return problems


def _content_problems(check: MarkerCheck) -> list[str]:
    try:
        marker = RunnerMarker.parse(check.path.read_text())
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else f"not a runner marker ({exc})"
        return [f"the runner marker {check.path} cannot be used: {reason} (docs/action.md, "
                "'Provisioning a GPU runner')"]
    problems = []
    if marker.boot_id != check.boot_id:
        problems.append(f"the runner marker is from another boot ({marker.boot_id}, this boot "
                        f"is {check.boot_id}): the machine was not provisioned for this job")
    if not check.runner_name:
        problems.append("RUNNER_NAME is not set: cannot tell which runner this is")
    elif marker.runner_name != check.runner_name:
        problems.append(f"the runner marker names runner {marker.runner_name!r}, not this "
                        f"runner {check.runner_name!r}")
    return problems


def model_cache_problems(path: Path, user: JobUser,
                         mountinfo: Path = Path("/proc/self/mountinfo")) -> list[str]:
    """The model cache must be read-only for the job: a read-only mount with no writable
    mount inside it, or no entry that the job's user owns or may write; and no symbolic
    link in it may lead to a file the job may write (a link resolves to its target)."""
    try:
        if not path.is_dir():
            return [f"the model cache {path} is not a folder"]
        read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError as exc:
        return [f"cannot read the model cache {path}: {exc.strerror}"]
    root = path.resolve()
    problems = [f"a writable mount {m} is inside the model cache {path}: mount it read-only too"
                for m in _writable_mounts_under(root, mountinfo)]
    for count, entry in enumerate(_walk(path)):
        if count >= MAX_CACHE_ENTRIES:
            return problems if read_only else [
                *problems, f"the model cache {path} holds over {MAX_CACHE_ENTRIES} entries: "
                "mount it read-only"]
        problem = _entry_problem(entry, root, user, checked_mode=not read_only)
        if problem:
            return [*problems, problem]
    return problems


def _entry_problem(entry: Path, root: Path, user: JobUser, *, checked_mode: bool) -> str | None:
    st = entry.lstat()
    if stat.S_ISLNK(st.st_mode):
        try:
            target = entry.resolve(strict=True)
        except (OSError, RuntimeError):
            return None  # a dangling or looping link loads nothing
        if target.is_relative_to(root):
            return None  # walked on its own
        return (f"{entry} in the model cache links to {target}, outside it: every model file "
                "must live in the read-only cache")
    if checked_mode and user.may_write(st):
        return (f"the model cache is writable by this job ({entry}, owner uid {st.st_uid}, "
                f"mode {stat.S_IMODE(st.st_mode):o}): mount it read-only, so that no job "
                "can change a model a later job loads")
    return None


def _writable_mounts_under(root: Path, mountinfo: Path) -> list[str]:
    """Mount points strictly inside `root` mounted read-write (/proc/self/mountinfo)."""
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) < 6:
            continue
        point = Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
        if point != root and point.is_relative_to(root) and "rw" in fields[5].split(","):
            found.append(str(point))
    return found


def _walk(root: Path) -> Iterable[Path]:
    yield root
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            yield Path(folder, name)


def metadata_problems(endpoints: Iterable[str], timeout_s: float = 1.0) -> list[str]:
    """The instance metadata service must not answer: it hands out the VM's credentials."""
    problems = []
    for endpoint in endpoints:
        host, _, port = endpoint.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                problems.append(f"the instance metadata service at {endpoint} answers: block it "
                                "for the runner user (docs/security.md, 'Provisioning a GPU runner')")
        except (OSError, ValueError):
            continue  # refused, unreachable or timed out: blocked
    return problems


def default_cache_dirs(user: JobUser, tmp: Path = Path("/tmp")) -> list[Path]:
    """Where vLLM, torch and Triton keep compiled code, the gate its calibrations and models,
    and pip and uv the packages they install, when nothing points them elsewhere."""
    name = _user_name(user.uid)
    cache = user.home / ".cache"
    return [cache / "vllm", user.home / ".triton", user.home / ".nv" / "ComputeCache",
            cache / "torch_extensions", cache / "flashinfer", tmp / f"torchinductor_{name}",
            cache / "gate", cache / "pip", cache / "uv"]


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def stale_cache_problems(dirs: Iterable[Path]) -> list[str]:
    """A compile cache already there is a channel from an earlier job: refuse it."""
    return [f"a cache from before this job is at {d}: the runner is not fresh"
            for d in dirs if d.is_dir() and any(not p.is_dir() for p in d.rglob("*"))]


# ---------------------------------------------------------------- what a job can leave behind


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    uid: int
    name: str
    exe: str | None = None  # /proc/PID/exe, when it can be read (our own user's processes)


def process_table(proc: Path = PROC) -> dict[int, Process]:
    """Every process /proc shows: pid, parent, real uid, name, executable."""
    table = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
            uid_line = next(ln for ln in (entry / "status").read_text().splitlines()
                            if ln.startswith("Uid:"))
        except (OSError, StopIteration):
            continue  # it ended while we looked
        name = stat_line[stat_line.index("(") + 1:stat_line.rindex(")")]
        ppid = int(stat_line[stat_line.rindex(")") + 2:].split()[1])
        try:
            exe = os.readlink(entry / "exe")
        except OSError:
            exe = None
        table[int(entry.name)] = Process(int(entry.name), ppid, uid=int(uid_line.split()[1]),
                                         name=name, exe=exe)
    return table


def ancestors(table: Mapping[int, Process], pid: int) -> list[Process]:
    """`pid` and its parents, nearest first."""
    chain, seen = [], set()
    while pid in table and pid not in seen:
        seen.add(pid)
        chain.append(table[pid])
        pid = table[pid].ppid
    return chain


def job_worker(table: Mapping[int, Process], me: int) -> Process | None:
    """The runner's process for this job: the nearest Runner.Worker above `me`."""
    return next((p for p in ancestors(table, me) if p.name == WORKER), None)


def leftover_problems(table: Mapping[int, Process], me: int, uid: int) -> list[str]:
    """Processes of the job's user that are not this job's: neither above `me` (the runner)
    nor below this job's Runner.Worker. A process an earlier job left (a daemon) is one."""
    worker = job_worker(table, me)
    if worker is None:
        return [f"no {WORKER} process above this one: not run as a job of a runner, so "
                "processes left from before cannot be told from this job's own"]
    children: dict[int, list[int]] = {}
    for p in table.values():
        children.setdefault(p.ppid, []).append(p.pid)
    below, todo = set(), [worker.pid]
    while todo:
        pid = todo.pop()
        below.add(pid)
        todo += [c for c in children.get(pid, []) if c not in below]
    mine = below | {p.pid for p in ancestors(table, me)}
    return [f"process {p.pid} ({ascii(p.name)}) of the job's user runs outside this job's runner "
            "process: left by an earlier job, or started beside it; the runner is not fresh"
            for p in sorted(table.values(), key=lambda p: p.pid)
            if p.uid == uid and p.pid not in mine]


def runner_log_problems(worker: Process | None) -> list[str]:
    """The runner writes one _diag/Worker_*.log per job: on a runner provisioned for this job
    there is exactly one. More is a registration or folder that ran jobs before."""
    if worker is None or not worker.exe:
        return ["cannot find the runner's folder (its Runner.Worker executable): cannot tell "
                "how many jobs it ran"]
    diag = Path(worker.exe).parent.parent / "_diag"
    try:
        logs = sorted(p.name for p in diag.iterdir() if p.name.startswith("Worker_"))
    except OSError as exc:
        return [f"cannot read the runner's log folder {diag}: {exc.strerror}"]
    if len(logs) != 1:
        return [f"the runner's log folder {diag} holds {len(logs)} job logs (Worker_*.log), "
                "not this job's alone: the runner ran other jobs before"]
    return []


def config_problems(user: JobUser, environ: Mapping[str, str]) -> list[str]:
    """Configuration a later job's git or pip (or any program) would obey, in the user's
    home or in the environment the runner gives every job."""
    config = Path(environ.get("XDG_CONFIG_HOME") or user.home / ".config")
    files = [user.home / ".gitconfig", config / "git", user.home / ".config" / "git",
             config / "pip", user.home / ".config" / "pip", user.home / ".pip",
             user.home / ".pydistutils.cfg", user.home / ".netrc"]
    problems = [f"{path} exists: git or pip of every later job would obey it; the runner is "
                "not fresh" for path in dict.fromkeys(files) if path.exists() or path.is_symlink()]
    for system in (Path("/etc/gitconfig"), Path("/etc/pip.conf"), Path("/etc/xdg/pip")):
        try:
            if user.may_write(system.lstat()):
                problems.append(f"{system} is writable by the job's user")
        except OSError:
            continue  # absent: nothing to obey
    problems += [f"{name} is set in the job's environment: it steers the programs the job "
                 "runs (the runner's .env file, or an earlier job's)"
                 for name in sorted(environ) if name in STEERING_VARS or name.startswith("PIP_")]
    return problems


def path_problems(user: JobUser, path_value: str) -> list[str]:
    """A folder on PATH that the job's user may write and that holds a file could shadow any
    program a later step runs (`~/.local/bin/python3`)."""
    problems = []
    for entry in dict.fromkeys(p for p in path_value.split(os.pathsep) if p):
        folder = Path(entry)
        try:
            st = folder.stat()
            if not stat.S_ISDIR(st.st_mode):
                continue
            inside_home = folder.resolve().is_relative_to(user.home.resolve())
            if (user.may_write(st) or inside_home) and any(folder.iterdir()):
                problems.append(f"{folder} is on PATH, writable by the job's user, and holds "
                                "files: they could stand in for any program a step runs")
        except OSError:
            continue  # a folder that is not there shadows nothing
    return problems


@dataclass
class JobCaches:
    root: Path
    model_cache: Path
    env: dict[str, str] = field(default_factory=dict)


def prepare_job_caches(root: Path, model_cache: Path) -> JobCaches:
    """Create the job's cache folder (it must not exist yet) and the variables that point
    vLLM, torch, Triton and the Hub at it (the models: read-only and offline)."""
    try:
        root.mkdir(parents=True, exist_ok=False, mode=0o700)
    except FileExistsError:
        raise GateError(f"the job's cache folder {root} exists already (the check ran before "
                        "in this job, or something else made it); refusing to share it",
                        exit_code=EXIT_FAIL) from None
    env = {}
    for var, sub in COMPILE_CACHE_VARS.items():
        (root / sub).mkdir(mode=0o700)
        env[var] = str(root / sub)
    env.update({"HF_HUB_CACHE": str(model_cache), **OFFLINE_VARS})
    return JobCaches(root, model_cache, env)
