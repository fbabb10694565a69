"""A runnable vLLM build of any commit of a vLLM repository, made the cheapest way it can be
(docs/bisect.md#how-a-step-is-installed):

1. overlay: when the commit differs from a build already installed only in files an overlay
   can carry (the package's Python files and data), those files over that build
   (gate.runner.overlay): milliseconds, no interpreter of its own;
2. otherwise a real install of the commit into a virtualenv of its own, from a shared clone
   checked out at the commit: `precompiled` (VLLM_USE_PRECOMPILED=1 with the commit's own
   precompiled wheel, VLLM_PRECOMPILED_WHEEL_COMMIT=commit, as gate install-vllm does) or
   `source`; a commit whose install fails is reported, never guessed at. The new build
   then serves as a base for later overlays.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from gate.core.child_env import code_under_test_env, scratch_cwd
from gate.core.errors import GateError
from gate.core.git import changed_paths, file_at, run_git
from gate.plan.hot_paths import WATCHED_PATHS, watched
from gate.runner import install, overlay

InstallMode = Literal["precompiled", "source", "none"]
PINS = "requirements/"  # the build's dependency pins: what pip installs, never an overlay


class InstalledBuild(BaseModel):
    """A vLLM build installed in an interpreter, and the commit its files are from."""

    commit: str
    python: str
    package_dir: str = Field(description="where its vllm package is (the overlays' base)")
    how: str = "installed before the bisect"


class CommitBuild(BaseModel):
    """One commit's build, ready to serve: the interpreter and the environment to run it."""

    commit: str
    python: str
    env: dict[str, str] = Field(default_factory=dict)
    how: str = Field(description="how it was made, in words")
    overlay_files: list[str] = Field(default_factory=list,
                                     description="the package files the overlay carries")


class Overlay(BaseModel):
    """What an overlay over `base` needs for a commit: the files to write and to leave out."""

    base: InstalledBuild
    files: list[str]
    removed: list[str]


class NotBuilt(GateError):
    """The commit could not be built (or installed) here: skip it, never blame it."""


def overlay_for(repo: Path, commit: str, builds: list[InstalledBuild],
                package: str = overlay.PACKAGE) -> Overlay | None:
    """The smallest overlay over one of `builds` that makes `commit`; None when every build
    differs from it in something an overlay cannot carry (compiled sources, build inputs)."""
    found = []
    for base in builds:
        changes = changed_paths(repo, base.commit, commit)
        if not _carried(repo, base.commit, new=commit, changes=changes, package=package):
            continue
        inside = [(s, p) for s, p in changes if overlay.overlayable(p, package)]
        found.append(Overlay(base=base, files=[p for s, p in inside if s != "D"],
                             removed=[p for s, p in inside if s == "D"]))
    return min(found, key=lambda o: len(o.files) + len(o.removed), default=None)


def overlay_only(repo: Path, old: str, new: str, package: str = overlay.PACKAGE) -> bool:
    """Whether everything `new` changes against `old` that a build shows is overlayable."""
    return _carried(repo, old, new=new, changes=changed_paths(repo, old, new), package=package)


def _carried(repo: Path, old: str, *, new: str, changes: list[tuple[str, str]],
             package: str) -> bool:
    """Whether an overlay carries every change old..new that a build shows: the package's
    Python files, no build input (the build's binaries stay the build's) and no pin (an
    overlay installs nothing: a new xgrammar pin needs pip, gate install-vllm)."""
    paths = [p for _, p in changes]
    inside = all(overlay.overlayable(p, package) for p in paths if p.startswith(package + "/"))
    pins = any(p.startswith(PINS) for p in paths)
    return inside and not pins and not install.build_inputs_changed(repo, old, new, paths)


def make_overlay(repo: Path, commit: str, plan: Overlay, dest: Path) -> CommitBuild:
    files = {p: file_at(repo, commit, p) for p in plan.files}
    folder = overlay.build_overlay(Path(plan.base.package_dir), dest, files, plan.removed)
    count = len(plan.files) + len(plan.removed)
    return CommitBuild(
        commit=commit, python=plan.base.python, env=overlay.overlay_env(folder),
        how=f"overlay of {count} package file(s) over the build of {plan.base.commit[:12]} "
            f"({plan.base.how})",
        overlay_files=sorted(plan.files + plan.removed))


def installed_as(repo: Path, commit: str, python: str,
                 package: str = overlay.PACKAGE) -> InstalledBuild:
    """The build installed for `python`, checked to hold `commit`'s hot-path files (an overlay
    over another build would measure that build's files, not the commit's)."""
    folder = overlay.installed_package(python, package)
    listing = run_git(repo, ["ls-tree", "-r", "-z", commit, "--", f"{package}/"],
                      f"listing {package}/ at {commit[:12]}").decode("utf-8", "replace")
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        if not watched(path, WATCHED_PATHS) or not overlay.overlayable(path, package):
            continue
        installed = folder.parent / path
        if not installed.is_file() or _blob_id(installed.read_bytes()) != meta.split()[2]:
            raise GateError(
                f"the build installed for {python} is not commit {commit[:12]}: its {path} "
                f"{'differs' if installed.is_file() else 'is missing'} ({folder}); name the "
                "commit it was installed from with --installed-commit")
    return InstalledBuild(commit=commit, python=python, package_dir=str(folder),
                          how=f"the build installed for {python}")


def _blob_id(content: bytes) -> str:
    """git's object id of a file's content (what ls-tree lists), without running git."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()  # noqa: S324


def commit_over(repo: Path, commit: str, installed: InstalledBuild, dest: Path) -> CommitBuild:
    """`commit` as an overlay of its package files over `installed` (the installed build as
    it is when they do not differ); a GateError when an overlay cannot carry the difference."""
    plan = overlay_for(repo, commit, [installed])
    if plan is None:
        raise GateError(
            f"{commit[:12]} differs from the installed build ({installed.commit[:12]}) in what "
            "an overlay cannot carry (compiled sources, build inputs or pins): install it "
            "(gate install-vllm) and pass its interpreter instead")
    if not (plan.files or plan.removed):
        return CommitBuild(commit=commit, python=installed.python, env={},
                           how=f"the build of {installed.commit[:12]} as installed")
    return make_overlay(repo, commit, plan, dest)


def install_commit(repo: Path, commit: str, *, mode: InstallMode, dest: Path,
                   python: str = sys.executable) -> InstalledBuild:
    """A real install of `commit` into DEST/venv from a shared clone in DEST/src; NotBuilt
    when `mode` is none or the install fails."""
    if mode == "none":
        raise NotBuilt(f"{commit[:12]} changes more than Python files and --install is none")
    src, venv = dest / "src", dest / "venv"
    dest.mkdir(parents=True, exist_ok=True)
    try:
        if not (src / ".git").exists():
            run_git(dest, ["clone", "--quiet", "--shared", "--no-checkout", str(repo.resolve()),
                           str(src)], "cloning the repository for an install", timeout_s=600)
        run_git(src, ["checkout", "--quiet", "--detach", commit], f"checking out {commit[:12]}")
        subprocess.run([python, "-m", "venv", str(venv)], check=True, capture_output=True,
                       timeout=600, env=code_under_test_env(os.environ), cwd=scratch_cwd())
        target = str(venv / "bin" / "python")
        plan = install.plan_install(install.InstallRequest(mode, target, src=src,
                                                           base_ref=commit))
        install.run_install(plan)
    except (GateError, subprocess.SubprocessError, OSError) as exc:
        raise NotBuilt(f"the {mode} install of {commit[:12]} failed: "
                       f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    return InstalledBuild(commit=commit, python=target,
                          package_dir=str(overlay.installed_package(target)),
                          how=f"{mode} install of {commit[:12]}")
