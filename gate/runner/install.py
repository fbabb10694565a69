"""`gate install-vllm`: put the PR's vLLM build into a runner's virtualenv.

Modes:
- precompiled: `VLLM_USE_PRECOMPILED=1 pip install -e SRC`, the PR's Python over the compiled
  binaries of the merge-base commit. VLLM_PRECOMPILED_WHEEL_COMMIT is set explicitly to the
  merge base (a detached HEAD would otherwise fall back to the nightly wheel); --variant sets
  the CUDA variant (VLLM_PRECOMPILED_WHEEL_VARIANT, e.g. cu129). Only what the merge base's
  binaries were compiled from makes them stale (`build_inputs_changed`): compiled sources
  (csrc/, cmake/, CMakeLists.txt, setup.py), the build pins (pyproject.toml's [build-system],
  requirements/build*.txt, requirements/cuda.txt); then it falls back to `source` and says so.
  A runtime pin (requirements/common.txt: the xgrammar pin) stays precompiled: pip installs
  the new pin beside the old binaries. When the merge base has no wheel for the variant, the
  error names the wheel it looked for and the fallbacks: the variants that commit does have,
  or source mode.
- source: `pip install -e SRC` with MAX_JOBS, capped by memory (`max_jobs`).
- wheel: `pip install URL`.
- preinstalled: install nothing; check that vllm imports in that interpreter, print its version.

Commands are argument lists run without a shell; --dry-run prints them and runs none.
"""

from __future__ import annotations

import collections
import os
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gate.core import git
from gate.core.child_env import code_under_test_env, scratch_cwd
from gate.core.errors import EXIT_ERROR, GateError
from gate.core.git import git_text
from gate.runner import wheels

MODES = ("precompiled", "source", "wheel", "preinstalled")
OUTPUT_KEPT_LINES = 400  # of an install step's output, for the diagnosis of a failure
# What the compiled binaries are built from (a folder ends in /). pyproject.toml counts only
# through its [build-system] table (`build_inputs_changed`).
BUILD_INPUTS = ("csrc/", "cmake/", "CMakeLists.txt", "setup.py", "requirements/build.txt",
                "requirements/build-", "requirements/cuda.txt")
PYPROJECT = "pyproject.toml"
# nvcc's peak per job on vLLM's kernels is several GiB; vLLM's docs lower MAX_JOBS when a
# build runs out of memory. A job per this much available memory, at most one per CPU.
GIB_PER_BUILD_JOB = 4
# What each mode costs, said before it starts (docs/action.md, "Installs sized to what
# changed"): a precompiled install downloads one wheel and the Python dependencies.
EXPECTED = {"precompiled": "a few minutes (one precompiled wheel and the Python dependencies "
                           "to download)",
            "source": "a full build of vLLM's kernels: tens of minutes to over an hour at "
                      "MAX_JOBS={jobs}, with nvcc and the CUDA toolkit on the runner",
            "wheel": "a few minutes (one wheel and its dependencies)",
            "preinstalled": "nothing to install"}
VERSION_PROBE = "import vllm, sys; sys.stdout.write(vllm.__version__)"


@dataclass
class Step:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None

    def render(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        cwd = f"(cd {shlex.quote(self.cwd)}) " if self.cwd else ""
        return f"{cwd}{env + ' ' if env else ''}{shlex.join(self.argv)}"


@dataclass(kw_only=True)
class InstallPlan:
    mode: str
    requested: str
    steps: list[Step]
    notes: list[str] = field(default_factory=list)
    merge_base: str | None = None
    build_inputs_touched: list[str] = field(default_factory=list)
    wheel_index: str = wheels.DEFAULT_INDEX
    max_jobs: str = "1"


@dataclass(frozen=True)
class InstallRequest:
    """What `gate install-vllm` was asked for."""

    mode: str
    python: str
    src: Path | None = None
    base_ref: str = "origin/main"
    wheel: str | None = None
    max_jobs: int | None = None
    variant: str | None = None  # precompiled: the CUDA variant of the merge base's wheel
    wheel_index: str = wheels.DEFAULT_INDEX  # where the variants are looked up on a failure


def is_build_input(path: str) -> bool:
    """A file the compiled binaries are built from (pyproject.toml: see build_inputs_changed)."""
    return any(path == b or (b.endswith(("/", "-")) and path.startswith(b)) for b in BUILD_INPUTS)


def build_inputs_changed(repo: Path, old: str, new: str, paths: list[str]) -> list[str]:
    """Of `paths` (what old..new changes), those that make old's binaries stale for new:
    the build inputs, and pyproject.toml when its [build-system] table differs."""
    stale = [p for p in paths if is_build_input(p)]
    if PYPROJECT in paths and _build_system(repo, old) != _build_system(repo, new):
        stale.append(PYPROJECT)
    return stale


def _build_system(repo: Path, commit: str) -> object:
    try:
        text = git.file_at(repo, commit, PYPROJECT).decode("utf-8", "replace")
    except GateError:
        return None  # no pyproject.toml at that commit
    try:
        return tomllib.loads(text).get("build-system")
    except tomllib.TOMLDecodeError:
        return text  # unreadable: any change to it counts


def touched_build_inputs(src: Path, merge_base: str) -> list[str]:
    changed = git_text(src, ["diff", "--name-only", f"{merge_base}..HEAD"],
                       "listing the files the PR changes").splitlines()
    return build_inputs_changed(src, merge_base, "HEAD", changed)


def max_jobs(cpus: int | None = None, available_gib: float | None = None) -> int:
    """MAX_JOBS of a source build: one per CPU, at most one per GIB_PER_BUILD_JOB GiB of
    available memory (an out-of-memory nvcc fails the build an hour in)."""
    cpus = cpus or os.cpu_count() or 1
    if available_gib is None:
        available_gib = _available_gib()
    by_memory = int(available_gib // GIB_PER_BUILD_JOB) if available_gib else cpus
    return max(1, min(cpus, by_memory))


def _available_gib(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / (1 << 20)
    except (OSError, ValueError, IndexError):
        pass
    return None


def plan_install(req: InstallRequest) -> InstallPlan:
    if req.mode not in MODES:
        raise GateError(f"--mode {req.mode!r}: choose one of {', '.join(MODES)}")
    pip = [req.python, "-m", "pip", "install"]
    if req.mode == "preinstalled":
        return InstallPlan(mode=req.mode, requested=req.mode, steps=[],
                           notes=[f"use the vLLM already installed for {req.python}"])
    if req.mode == "wheel":
        if not req.wheel:
            raise GateError("--mode wheel needs --wheel URL")
        return InstallPlan(mode=req.mode, requested=req.mode, steps=[Step([*pip, req.wheel])])
    src = req.src
    if src is None or not ((src / ".git").exists() or (src / "setup.py").exists()):
        raise GateError(f"--mode {req.mode} needs --src, the vLLM source checkout (got {src})")
    src = src.resolve()
    jobs = str(req.max_jobs or max_jobs())
    source = Step([*pip, "-e", str(src)], {"MAX_JOBS": jobs}, str(src))
    if req.mode == "source":
        return InstallPlan(mode=req.mode, requested=req.mode, steps=[source], max_jobs=jobs)
    return _precompiled(req, src, source, jobs)


def _precompiled(req: InstallRequest, src: Path, source: Step, jobs: str) -> InstallPlan:
    merge_base = git.merge_base(src, git.resolve_ref(src, req.base_ref),
                                git.resolve_ref(src, "HEAD"))
    touched = touched_build_inputs(src, merge_base)
    if touched:
        shown = ", ".join(touched[:5]) + (" …" if len(touched) > 5 else "")
        note = (
            f"falling back to a source build: the diff {merge_base[:12]}..HEAD touches "
            f"compiled or build inputs ({shown}), so the merge base's binaries do not fit"
        )
        return InstallPlan(mode="source", requested=req.mode, steps=[source], notes=[note],
                           merge_base=merge_base, build_inputs_touched=touched, max_jobs=jobs)
    env = {"VLLM_USE_PRECOMPILED": "1", "VLLM_PRECOMPILED_WHEEL_COMMIT": merge_base}
    if req.variant:
        env["VLLM_PRECOMPILED_WHEEL_VARIANT"] = req.variant
    step = Step([*source.argv], env, str(src))
    variant = f", CUDA variant {req.variant}" if req.variant else ""
    note = f"precompiled binaries of the merge base {merge_base}{variant} under the PR's Python"
    return InstallPlan(mode=req.mode, requested=req.mode, steps=[step], notes=[note],
                       merge_base=merge_base, wheel_index=req.wheel_index, max_jobs=jobs)


def installed_vllm_version(python: str) -> str:
    """The vllm version importable by `python`, or a GateError saying why not."""
    try:
        proc = subprocess.run(
            [python, "-c", VERSION_PROBE], capture_output=True, text=True, timeout=300, check=False,
            env=code_under_test_env(os.environ), cwd=scratch_cwd(),
        )
    except FileNotFoundError:
        raise GateError(f"python interpreter {python} does not exist") from None
    except PermissionError:
        raise GateError(f"{python} is not executable") from None
    except subprocess.TimeoutExpired:
        raise GateError(f"`import vllm` in {python} did not finish in 300 s") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise GateError(f"vllm does not import in {python}: {last}")
    return proc.stdout.strip()


def run_install(plan: InstallPlan) -> None:
    for step in plan.steps:
        print(f"gate install-vllm: $ {step.render()}", file=sys.stderr, flush=True)
        code, output = run_step(step)
        if code == 0:
            continue
        missing = wheels.diagnose(output) if plan.mode == "precompiled" else None
        if missing is not None:
            raise GateError(wheels.advice(missing, plan.wheel_index, plan.merge_base,
                                          plan.max_jobs), exit_code=EXIT_ERROR)
        raise GateError(
            f"install step failed (exit {code}): {shlex.join(step.argv)}",
            exit_code=EXIT_ERROR,
        )


def run_step(step: Step) -> tuple[int, str]:
    """Run one step, its output passed on to stderr as it comes; (exit code, the output's last
    lines) for the diagnosis of a failure."""
    kept: collections.deque[str] = collections.deque(maxlen=OUTPUT_KEPT_LINES)
    try:
        proc = subprocess.Popen(step.argv, env=code_under_test_env({**os.environ, **step.env}, safe_path=False),
                                cwd=step.cwd,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace")
    except FileNotFoundError:
        raise GateError(f"cannot run {step.argv[0]}") from None
    assert proc.stdout is not None
    with proc:
        for line in proc.stdout:
            sys.stderr.write(line)
            kept.append(line)
    return proc.returncode, "".join(kept)
