"""The builds a bisect measures: each commit (or the parent with some of a change's hunks)
made the cheapest way (gate.runner.commit_build), and the check that it imports before a
server is started for it (docs/bisect.md#how-a-step-is-installed)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from gate.core.git import changed_paths, file_at
from gate.runner import commit_build, overlay
from gate.runner.commit_build import CommitBuild, InstalledBuild, InstallMode, NotBuilt

# Replacement contents for package files (None: the file is left out).
Replacements = Mapping[str, bytes | None]


class StepBuilds:
    """Makes builds over the installed ones (`builds`, which grows as real installs are
    made; `on_install` is told so that the state keeps them)."""

    def __init__(self, repo: Path, builds: list[InstalledBuild], mode: InstallMode,
                 on_install: Callable[[InstalledBuild], None] = lambda b: None):
        self.repo, self.builds, self.mode, self.on_install = repo, builds, mode, on_install

    def build(self, commit: str, dest: Path, replace: Replacements | None = None
              ) -> CommitBuild:
        """`commit`'s build in `dest` (an overlay folder, or an install), with `replace`
        written over its package files. NotBuilt when it cannot be made here."""
        plan = commit_build.overlay_for(self.repo, commit, self.builds)
        if plan is None:
            installed = commit_build.install_commit(self.repo, commit, mode=self.mode,
                                                    dest=dest / "install",
                                                    python=self.builds[0].python)
            self.builds.append(installed)
            self.on_install(installed)
            plan = commit_build.Overlay(base=installed, files=[], removed=[])
        if not (plan.files or plan.removed or replace):
            return CommitBuild(commit=commit, python=plan.base.python,
                               env={"PYTHONSAFEPATH": "1"},
                               how=f"the build of {plan.base.commit[:12]} as installed "
                                   f"({plan.base.how})")
        return self._overlay(commit, plan, dest / "overlay", replace or {})

    def _overlay(self, commit: str, plan: commit_build.Overlay, dest: Path,
                 replace: Replacements) -> CommitBuild:
        files = {p: file_at(self.repo, commit, p) for p in plan.files}
        removed = set(plan.removed)
        for path, content in replace.items():
            if content is None:
                files.pop(path, None)
                removed.add(path)
            else:
                files[path] = content
                removed.discard(path)
        folder = overlay.build_overlay(Path(plan.base.package_dir), dest, files, removed)
        count = len(files) + len(removed)
        return CommitBuild(
            commit=commit, python=plan.base.python, env=overlay.overlay_env(folder),
            how=f"overlay of {count} package file(s) over the build of "
                f"{plan.base.commit[:12]} ({plan.base.how})",
            overlay_files=sorted([*files, *removed]))

    def changed_modules(self, old: str, new: str) -> list[str]:
        """The package's modules that differ between two commits (deleted ones left out)."""
        return _modules(p for s, p in changed_paths(self.repo, old, new) if s != "D")

    def import_problem(self, build: CommitBuild, reference: CommitBuild, modules: list[str]
                       ) -> str | None:
        """Why `build` cannot be served: a module that imports in the reference build and
        not in this one (a module that fails in both, e.g. GPU-only code on a CPU runner, is
        not this build's fault). None when they import."""
        failed = overlay.import_failures(build.python, build.env, modules)
        if not failed:
            return None
        also = overlay.import_failures(reference.python, reference.env, list(failed))
        own = {m: e for m, e in failed.items() if m not in also}
        if not own:
            return None
        name = _culprit_module(own)
        others = sorted(set(own) - {name})
        also_failing = f" (so do {', '.join(others[:3])}{' ...' if len(others) > 3 else ''})"
        return f"{name} does not import: {own[name]}" + (also_failing if others else "")


def _culprit_module(failed: dict[str, str]) -> str:
    """The module whose own file holds the line that failed (its importers fail with it);
    else one whose file the error names; else the first."""
    def own_file(module: str) -> tuple[str, str]:
        path = module.replace(".", "/")
        return f"at {path}.py:", f"at {path}/__init__.py:"

    for module, error in failed.items():
        if any(marker in error for marker in own_file(module)):
            return module
    named = [m for m, e in failed.items() if m.rsplit(".", 1)[-1] + ".py" in e]
    return (named or list(failed))[0]


def _modules(paths) -> list[str]:
    names = [overlay.module_name(p) for p in paths if overlay.overlayable(p)]
    return sorted({n for n in names if n})


def fresh_folder(path: Path) -> Path:
    """An empty folder at `path`: what a cancelled run left of an unfinished step goes."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


__all__ = ["NotBuilt", "StepBuilds", "fresh_folder"]
