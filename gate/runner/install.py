"""`gate install-vllm`: put the PR's vLLM build into a runner's virtualenv.

Modes:
- precompiled: `VLLM_USE_PRECOMPILED=1 pip install -e SRC`, the PR's Python over the compiled
  binaries of the merge-base commit. VLLM_PRECOMPILED_WHEEL_COMMIT is set explicitly to the
  merge base (a detached HEAD would otherwise fall back to the nightly wheel). When the diff
  merge-base..HEAD touches compiled or build inputs (csrc/, cmake/, CMakeLists.txt, setup.py,
  requirements/), falls back to `source` and says so.
- source: `pip install -e SRC` with MAX_JOBS.
- wheel: `pip install URL`.
- preinstalled: install nothing; check that vllm imports in that interpreter, print its version.

Commands are argument lists run without a shell; --dry-run prints them and runs none.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gate.core import git
from gate.core.child_env import code_under_test_env
from gate.core.errors import EXIT_ERROR, GateError
from gate.core.git import git_text

MODES = ("precompiled", "source", "wheel", "preinstalled")
BUILD_INPUTS = ("csrc/", "cmake/", "CMakeLists.txt", "setup.py", "requirements/")
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


@dataclass
class InstallPlan:
    mode: str
    requested: str
    steps: list[Step]
    notes: list[str] = field(default_factory=list)
    merge_base: str | None = None
    build_inputs_touched: list[str] = field(default_factory=list)


def touched_build_inputs(src: Path, merge_base: str) -> list[str]:
    changed = git_text(src, ["diff", "--name-only", f"{merge_base}..HEAD"],
                       "listing the files the PR changes").splitlines()
    return [p for p in changed if any(p == b or p.startswith(b) for b in BUILD_INPUTS)]


def plan_install(
    mode: str,
    python: str,
    *,
    src: Path | None = None,
    base_ref: str = "origin/main",
    wheel: str | None = None,
    max_jobs: int | None = None,
) -> InstallPlan:
    if mode not in MODES:
        raise GateError(f"--mode {mode!r}: choose one of {', '.join(MODES)}")
    pip = [python, "-m", "pip", "install"]
    if mode == "preinstalled":
        return InstallPlan(mode, mode, [], [f"use the vLLM already installed for {python}"])
    if mode == "wheel":
        if not wheel:
            raise GateError("--mode wheel needs --wheel URL")
        return InstallPlan(mode, mode, [Step([*pip, wheel])])
    if src is None or not ((src / ".git").exists() or (src / "setup.py").exists()):
        raise GateError(f"--mode {mode} needs --src, the vLLM source checkout (got {src})")
    src = src.resolve()
    jobs = str(max_jobs or os.cpu_count() or 1)
    source = Step([*pip, "-e", str(src)], {"MAX_JOBS": jobs}, str(src))
    if mode == "source":
        return InstallPlan(mode, mode, [source])
    merge_base = git.merge_base(src, git.resolve_ref(src, base_ref), git.resolve_ref(src, "HEAD"))
    touched = touched_build_inputs(src, merge_base)
    if touched:
        shown = ", ".join(touched[:5]) + (" …" if len(touched) > 5 else "")
        note = (
            f"falling back to a source build: the diff {merge_base[:12]}..HEAD touches "
            f"compiled or build inputs ({shown}), so the merge base's binaries do not fit"
        )
        return InstallPlan("source", mode, [source], [note], merge_base, touched)
    step = Step(
        [*pip, "-e", str(src)],
        {"VLLM_USE_PRECOMPILED": "1", "VLLM_PRECOMPILED_WHEEL_COMMIT": merge_base},
        str(src),
    )
    note = f"precompiled binaries of the merge base {merge_base} under the PR's Python"
    return InstallPlan(mode, mode, [step], [note], merge_base)


def installed_vllm_version(python: str) -> str:
    """The vllm version importable by `python`, or a GateError saying why not."""
    try:
        proc = subprocess.run(
            [python, "-c", VERSION_PROBE], capture_output=True, text=True, timeout=300, check=False,
            env=code_under_test_env(os.environ),
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
        try:
            proc = subprocess.run(step.argv, env=code_under_test_env({**os.environ, **step.env}),
                                  cwd=step.cwd)
        except FileNotFoundError:
            raise GateError(f"cannot run {step.argv[0]}") from None
        if proc.returncode != 0:
            raise GateError(
                f"install step failed (exit {proc.returncode}): {shlex.join(step.argv)}",
                exit_code=EXIT_ERROR,
            )
