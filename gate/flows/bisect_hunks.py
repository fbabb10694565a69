"""`gate bisect --hunks`: the smallest set of a change's hunks (its Python files in the
package) that, applied alone onto the parent build, still reproduces the slowdown
(docs/bisect.md#the-smallest-set-of-hunks; the search is gate.flows.hunk_search).

Two ways in:

- alone (`--hunks --head C [--base B]`): the change is one commit against its first parent,
  or a PR's head against its merge base; the reference is the parent's build;
- after a bisect (`--good G --bad B --hunks`): the change is the first bad commit. Its parent
  is the good commit or a commit the bisect measured as fast as the good build, so the good
  build is the reference, and the first bad commit's own step is the test of the whole
  change when the commit changed nothing an overlay cannot carry.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gate.core.errors import GateError
from gate.core.git import commit_subject, first_parent, merge_base, resolve_ref
from gate.evidence.bisect_record import (
    BisectState,
    CommitInfo,
    HunksResult,
    HunksState,
    HunkTest,
    StepRecord,
)
from gate.evidence.ddmin import Config
from gate.evidence.hunk_patch import python_hunks
from gate.flows.bisect_ab import ABRunner, ABSettings, ReferenceBroken
from gate.flows.bisect_builds import NotBuilt, StepBuilds, fresh_folder
from gate.flows.bisect_state import (
    HUNKS_STATE_FILE,
    Checkpoint,
    check_same,
    load_state,
    usable_builds,
)
from gate.flows.hunk_search import HunkReference, Tester, Uncached, result, save, search
from gate.runner.commit_build import InstalledBuild, InstallMode, overlay_only
from gate.runner.overlay import installed_package

PARENT_REFERENCE = "the parent build"
GOOD_REFERENCE = ("the good build: the parent is the good commit or was measured as fast as "
                  "it in the bisect")


@dataclass
class HunksOptions:
    repo: Path
    head: str
    out: Path
    python: str
    base: str | None = None  # None: the head's first parent
    installed_commit: str | None = None  # default: the parent
    install_mode: InstallMode = "precompiled"
    reuse_builds: bool = False  # a resumed state's installed builds: this folder is our own


def bisect_hunks(options: HunksOptions, settings: ABSettings, run: ABRunner | None = None
                 ) -> HunksResult:
    """Delta-debug one change on its own (or resume doing so)."""
    state = open_hunks_state(options, settings)
    checkpoint = Checkpoint(state, options.out / HUNKS_STATE_FILE)
    checkpoint.save()
    tester = Tester(state, checkpoint, out=options.out, settings=settings, run=run or ABRunner())
    try:
        minimal = _replay_or_measure(state, checkpoint, options, tester)
    except ReferenceBroken as exc:
        checkpoint.save()
        return save(result(state, None, f"the parent build could not be measured: {exc}"),
                    options.out)
    checkpoint.save()
    return save(result(state, minimal), options.out)


def open_hunks_state(options: HunksOptions, settings: ABSettings) -> HunksState:
    repo = options.repo.resolve()
    head = resolve_ref(repo, options.head)
    if options.base:
        parent = merge_base(repo, resolve_ref(repo, options.base), head)
    else:
        parent = first_parent(repo, head) or ""
        if not parent:
            raise GateError(f"{head[:12]} is a root commit: give --base")
    base = InstalledBuild(commit=resolve_ref(repo, options.installed_commit or parent),
                          python=options.python,
                          package_dir=str(installed_package(options.python)))
    fresh = _new_state(repo, parent, head=head, settings=settings, builds=[base],
                       reference=PARENT_REFERENCE)
    stored = load_state(HunksState, options.out / HUNKS_STATE_FILE)
    if stored is None:
        return fresh
    check_same(stored, fresh, ("repo", "parent", "head", "plan_hash", "hunks", "reference"),
               options.out / HUNKS_STATE_FILE)
    stored.builds = usable_builds(stored.builds, base, reuse=options.reuse_builds)
    return stored


def _new_state(repo: Path, parent: str, *, head: str, settings: ABSettings,
               builds: list[InstalledBuild], reference: str) -> HunksState:
    hunkset = python_hunks(repo, parent, head)
    if not hunkset.hunks:
        raise GateError(f"{head[:12]} changes no Python file of the vllm package against "
                        f"{parent[:12]}: no hunks to delta-debug")
    return HunksState(
        repo=str(repo), plan_hash=settings.plan.measurement_hash(), hunks=hunkset.hunks,
        parent=CommitInfo(sha=parent, subject=commit_subject(repo, parent)),
        head=CommitInfo(sha=head, subject=commit_subject(repo, head)), builds=builds,
        reference=reference)


def _replay_or_measure(state: HunksState, checkpoint: Checkpoint, options: HunksOptions,
                       tester: Tester) -> Config | None:
    """Replay the stored outcomes; make the parent's build only when a configuration is left
    to measure."""
    try:
        return search(state, checkpoint, options.out, tester)
    except Uncached:
        pass
    builds = StepBuilds(Path(state.repo), state.builds, options.install_mode,
                        on_install=lambda b: checkpoint.save())
    try:
        parent = builds.build(state.parent.sha, fresh_folder(options.out / "parent") / "build")
    except NotBuilt as exc:
        raise ReferenceBroken(str(exc)) from None
    tester.start(HunkReference(builds, parent))
    return search(state, checkpoint, options.out, tester)


# -- after a bisect ------------------------------------------------------------------------
def after_bisect_state(bisect: BisectState, culprit: StepRecord, out: Path,
                       settings: ABSettings) -> HunksState:
    """The state of the first bad commit's delta debugging in the bisect's folder: stored,
    or new with the commit's own step as the whole change's test when that step's build was
    exactly the parent plus these hunks."""
    repo = Path(bisect.repo)
    parent = first_parent(repo, culprit.commit) or bisect.good.sha
    fresh = _new_state(repo, parent, head=culprit.commit, settings=settings, builds=bisect.builds,
                       reference=GOOD_REFERENCE)
    stored = load_state(HunksState, out / HUNKS_STATE_FILE)
    if stored is not None:
        check_same(stored, fresh, ("repo", "parent", "head", "plan_hash", "hunks",
                                   "reference"), out / HUNKS_STATE_FILE)
        stored.builds = bisect.builds
        return stored
    if overlay_only(repo, parent, culprit.commit):
        fresh.tests.append(HunkTest(
            **culprit.model_dump(include=set(HunkTest.model_fields) - {"number", "seconds"}),
            number=1, hunks=list(range(len(fresh.hunks))), reproduces=True, seconds=0.0))
        fresh.tests[0].build = f"the bisect's step {culprit.number} ({culprit.build})"
    return fresh


def hunks_after_bisect(state: HunksState, out: Path, *, settings: ABSettings, run: ABRunner,
                       reference: HunkReference | None) -> HunksResult:
    """Delta-debug the first bad commit against the good build; with no reference, only
    replay what is stored: Uncached when something is left to measure."""
    checkpoint = Checkpoint(state, out / HUNKS_STATE_FILE)
    tester = Tester(state, checkpoint, out=out, settings=settings, run=run)
    if reference is not None:
        tester.start(reference)
    minimal = search(state, checkpoint, out, tester)
    checkpoint.save()
    return save(result(state, minimal), out)
