"""Is this runner fit to run a PR's code? The checks `gate trust check-runner` makes before
the measuring job checks out the code under test, and the per-job caches it sets up.

A self-hosted runner that ran an earlier job may carry what that job left: files, processes, a
patched toolchain, and caches that later jobs execute (a torch.compile / Inductor / Triton
cache entry is code; the nightly job on the default branch would run it). Nothing inside a job
can prove the past by itself, so the proof is split (docs/action.md, "Provisioning a GPU
runner"):

- the provisioning, as root, writes a marker for this boot and this runner registration
  (ephemeral, just-in-time: GitHub gives it one job), in a root-owned folder the runner user
  cannot write; the job checks the owner, the modes, the boot id and the runner name, and that
  it is not root itself (root could have written the marker);
- the model cache is mounted read-only: no entry in it may be writable by the job's user;
- the compile caches of vLLM, torch and Triton point at a folder of this job (created here,
  refused if it already exists), and none is left in their default places from before;
- the cloud's instance metadata service does not answer (it hands out the VM's credentials).

Every check fails closed: a problem found, or a fact that cannot be read, refuses the run.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gate.core.errors import EXIT_FAIL, GateError

DEFAULT_MARKER = Path("/etc/perf-gate/fresh-runner.json")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
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
}
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


class RunnerMarker(BaseModel):
    """The file the provisioning writes (as root) once per VM: which boot and which runner
    registration it was provisioned for."""

    model_config = ConfigDict(extra="ignore")

    boot_id: str = Field(min_length=1, description="/proc/sys/kernel/random/boot_id at provisioning")
    runner_name: str = Field(min_length=1, description="the ephemeral registration's runner name")
    ephemeral: Literal[True] = Field(description="registered for one job (--ephemeral or JIT)")


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
        marker = RunnerMarker.model_validate(json.loads(check.path.read_text()))
    except (OSError, ValueError, ValidationError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not a runner marker"
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


def model_cache_problems(path: Path, user: JobUser) -> list[str]:
    """The model cache must be read-only for the job: a read-only mount, or no entry that the
    job's user owns or may write."""
    try:
        if not path.is_dir():
            return [f"the model cache {path} is not a folder"]
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return []
    except OSError as exc:
        return [f"cannot read the model cache {path}: {exc.strerror}"]
    for count, entry in enumerate(_walk(path)):
        if count >= MAX_CACHE_ENTRIES:
            return [f"the model cache {path} holds over {MAX_CACHE_ENTRIES} entries: mount it "
                    "read-only"]
        st = entry.lstat()
        if not stat.S_ISLNK(st.st_mode) and user.may_write(st):
            return [f"the model cache is writable by this job ({entry}, owner uid {st.st_uid}, "
                    f"mode {stat.S_IMODE(st.st_mode):o}): mount it read-only, so that no job "
                    "can change a model a later job loads"]
    return []


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
                                "for the runner user (docs/action.md, 'Provisioning a GPU runner')")
        except (OSError, ValueError):
            continue  # refused, unreachable or timed out: blocked
    return problems


def default_cache_dirs(user: JobUser, tmp: Path = Path("/tmp")) -> list[Path]:
    """Where vLLM, torch and Triton keep compiled code when nothing points them elsewhere."""
    name = _user_name(user.uid)
    return [user.home / ".cache" / "vllm", user.home / ".triton", user.home / ".nv" / "ComputeCache",
            user.home / ".cache" / "torch_extensions", user.home / ".cache" / "flashinfer",
            tmp / f"torchinductor_{name}"]


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def stale_cache_problems(dirs: Iterable[Path]) -> list[str]:
    """A compile cache already there is a channel from an earlier job: refuse it."""
    return [f"a compile cache from before this job is at {d}: the runner is not fresh"
            for d in dirs if d.is_dir() and any(not p.is_dir() for p in d.rglob("*"))]


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
        raise GateError(f"the job's cache folder {root} exists already: this RUNNER_TEMP was "
                        "used before (a reused runner); refusing to run", exit_code=EXIT_FAIL) from None
    env = {}
    for var, sub in COMPILE_CACHE_VARS.items():
        (root / sub).mkdir(mode=0o700)
        env[var] = str(root / sub)
    env.update({"HF_HUB_CACHE": str(model_cache), **OFFLINE_VARS})
    return JobCaches(root, model_cache, env)
