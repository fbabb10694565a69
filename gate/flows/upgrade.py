"""What `gate ab` does around the rounds when its builds are named (docs/upgrade.md): resolve
both build specs (installing a release into the cache once: gate.runner.builds), write what
changed between two installed releases as hunks (gate.evidence.release_diff), make the first
start of each freshly installed build apart from the blocks (gate.flows.first_start), and
say in the verdict what each of these took.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gate.core.errors import GateError
from gate.core.files import write_atomic
from gate.evidence.hunks import HunkSet
from gate.evidence.release_diff import InstalledPackage, release_hunks, vllm_distribution
from gate.flows.first_start import Candidate, FirstStart
from gate.judge.verdict import Verdict
from gate.runner.builds import ResolvedBuild, resolve_build
from gate.runner.overlay import installed_package
from gate.runner.release_venv import CPU_TORCH_INDEX

HUNKS_FILE = "hunks.json"
REPO_DIR = "release-diff"
LABELS = ("base", "head")


@dataclass
class Builds:
    """Both sides' resolved builds, and what preparing them took."""

    resolved: dict[str, ResolvedBuild]
    hunkset: HunkSet | None = None
    hunks_path: Path | None = None
    first: list[FirstStart] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def candidates(self, envs: dict[str, dict[str, str]]) -> list[Candidate]:
        """The builds as first starts launch them, with each side's own environment."""
        return [Candidate(label, b.name, b.python, {**b.env, **envs.get(label, {})},
                          installed_by_gate=b.installed is not None)
                for label, b in self.resolved.items()]

    @property
    def seconds(self) -> dict[str, float]:
        """Runner seconds spent outside the blocks: installs made now, first starts."""
        out = {}
        installs = [b.installed.marker.install_s for b in self.resolved.values()
                    if b.installed is not None and b.installed.fresh]
        if installs:
            out["install"] = round(sum(installs), 1)
        if self.first:
            out["first_start"] = round(sum(f.seconds for f in self.first), 1)
        return out

    def annotate(self, verdict: Verdict) -> Verdict:
        """The verdict with how the builds were made, what changed between them, and the time
        spent outside the blocks."""
        notes = [*self.notes, *(f.note for f in self.first)]
        return verdict.model_copy(update={
            "notes": verdict.notes + notes,
            "runner_seconds": {**verdict.runner_seconds, **self.seconds}})


def resolve(specs: dict[str, str | None], *, cache_dir: Path,
            torch_index: str = CPU_TORCH_INDEX,
            log: Callable[[str], None] = print) -> Builds:
    """Both sides' builds (base first), each installed first when the cache lacks it."""
    resolved = {label: resolve_build(specs.get(label), label=label, cache_dir=cache_dir,
                                     torch_index=torch_index, log=log) for label in LABELS}
    notes = [f"{label} build: {b.how}" + _repairs(b) for label, b in resolved.items()
             if b.installed is not None]
    return Builds(resolved, notes=notes)


def _repairs(build: ResolvedBuild) -> str:
    marker = build.installed.marker if build.installed else None
    if marker is None or not build.installed or not build.installed.fresh:
        return ""
    done = []
    if marker.extra_index:
        done.append(f"torch from {marker.extra_index}")
    if marker.removed:
        done.append(f"removed {', '.join(marker.removed)}")
    return f" ({'; '.join(done)})" if done else ""


def write_release_diff(builds: Builds, out: Path, log: Callable[[str], None] = print) -> None:
    """When the two builds are different vLLM versions: the hunks between their installed
    packages, written to OUT/hunks.json (and kept on `builds` for the profile diff to rank)."""
    if builds.resolved["base"].python == builds.resolved["head"].python:
        return  # one installed package (an overlay or an environment apart: not a release)
    packages = {label: _package(b) for label, b in builds.resolved.items()}
    base, head = packages["base"], packages["head"]
    if base is None or head is None or base.name == head.name:
        return
    hunkset = release_hunks(base, head, out / REPO_DIR)
    path = out / HUNKS_FILE
    write_atomic(path, hunkset.model_dump_json(indent=1) + "\n")
    builds.hunkset, builds.hunks_path = hunkset, path
    top = next((h for h in hunkset.hunks if h.mechanisms), None)
    lead = f"; top: {top.path}:{top.new_start} [{', '.join(top.mechanisms)}]" if top else ""
    line = (f"what changed from {base.name} to {head.name}: {len(hunkset.hunks)} hunk(s) in "
            f"{hunkset.files_watched} watched file(s){lead} ({path})")
    builds.notes.append(line)
    log(line)


def _package(build: ResolvedBuild) -> InstalledPackage | None:
    """The build's installed vllm package and its distribution's name and version, when it
    can be told (an installed build's folder is known without a probe)."""
    try:
        folder = build.package_dir or installed_package(build.python)
    except GateError:
        return None  # no installed vllm to diff (a launch command, a URL): no hunks
    dist = vllm_distribution(folder.parent)
    return InstalledPackage(f"{dist.metadata['Name']} {dist.version}", folder) if dist else None
