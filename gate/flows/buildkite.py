"""A PR's A/B where vLLM's CI runs (docs/buildkite.md): the head is the PR's CI image as it
was installed (`preinstalled`), the base the merge base's Python files over that same build
(an overlay: gate.runner.overlay), so both sides share the image's compiled extensions, torch
and CUDA, and no second build is made. A PR that changes what an overlay cannot carry
(compiled sources, build inputs) needs the base built as well, and is refused here with that
said."""

from __future__ import annotations

from pathlib import Path

from gate.core.errors import GateError
from gate.core.git import resolve_ref
from gate.runner import overlay
from gate.runner.commit_build import CommitBuild, InstalledBuild, make_overlay, overlay_for


def base_over_head(repo: Path, *, head: str, base: str, python: str, dest: Path) -> CommitBuild:
    """The merge base `base` as an overlay over the head's installed build in `python`."""
    head_sha, base_sha = resolve_ref(repo, head), resolve_ref(repo, base)
    installed = InstalledBuild(commit=head_sha, python=python,
                               package_dir=str(overlay.installed_package(python)),
                               how="the PR's CI image as installed")
    plan = overlay_for(repo, base_sha, [installed])
    if plan is None:
        raise GateError(
            f"the PR ({head_sha[:12]}) changes files an overlay over its build cannot undo "
            f"for the base {base_sha[:12]} (compiled sources or build inputs): the base needs "
            "its own build (gate install-vllm into a second interpreter, then gate ab --base)")
    return make_overlay(repo, base_sha, plan, dest)
