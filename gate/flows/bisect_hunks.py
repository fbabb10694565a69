"""`gate bisect --hunks`: the smallest set of a change's hunks (its Python files in the
package) that, applied alone onto the parent build, still reproduces the slowdown
(docs/bisect.md#the-smallest-set-of-hunks).

The change is one commit (against its first parent) or a PR's head against its merge base.
Each configuration is an overlay: the parent's build with the chosen hunks applied
(gate.evidence.hunk_patch), A/B'd against the parent build like a bisect step; it reproduces
when that A/B fails. First the whole change is tested (ddmin's premise); its profile diff
orders the hunks (gate.evidence.attribution) and the hunk it blames is tried alone; if that
does not reproduce, ddmin (gate.evidence.ddmin) runs over the hunks in that order. Every
configuration's outcome is kept in hunks-state.json, so a cancelled run goes on where it
stopped: ddmin is deterministic and replays the stored outcomes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from gate.core.errors import GateError
from gate.core.files import write_atomic
from gate.core.git import commit_subject, first_parent, merge_base, resolve_ref
from gate.evidence.attribution import rank_hunks_by_evidence
from gate.evidence.bisect_record import (
    CommitInfo,
    HunksOutcome,
    HunksResult,
    HunksState,
    HunkTest,
)
from gate.evidence.ddmin import Config, ddmin
from gate.evidence.hunk_patch import apply_hunks, python_hunks
from gate.evidence.hunks import HunkSet
from gate.flows.bisect_ab import (
    ABSettings,
    BuildUnderTest,
    ReferenceBroken,
    ReferenceServer,
    RunAB,
    decide,
    reference_server,
    run_ab,
)
from gate.flows.bisect_builds import NotBuilt, StepBuilds, fresh_folder
from gate.flows.bisect_result import effect_text
from gate.flows.bisect_state import (
    HUNKS_STATE_FILE,
    Checkpoint,
    check_same,
    load_state,
    relative,
    usable_builds,
)
from gate.flows.diff_artifacts import load_written
from gate.judge.verdict import Outcome
from gate.report.bisect import render_hunks
from gate.runner.commit_build import CommitBuild, InstalledBuild, InstallMode
from gate.runner.overlay import installed_package, module_name

RESULT_FILE = "hunks-bisect.json"
REPORT_FILE = "hunks-bisect.md"


@dataclass
class HunksOptions:
    repo: Path
    head: str
    out: Path
    python: str
    base: str | None = None  # None: the head's first parent
    installed_commit: str | None = None  # default: the parent
    install_mode: InstallMode = "precompiled"


def bisect_hunks(options: HunksOptions, settings: ABSettings, run: RunAB = run_ab
                 ) -> HunksResult:
    state = open_hunks_state(options, settings)
    checkpoint = Checkpoint(state, options.out / HUNKS_STATE_FILE)
    checkpoint.save()
    minimal: Config | None = None
    try:
        minimal = _search(state, checkpoint, options, settings, run)
    except ReferenceBroken as exc:
        checkpoint.save()
        return _save(_result(state, None, f"the parent build could not be measured: {exc}"),
                     options.out)
    checkpoint.save()
    return _save(_result(state, minimal), options.out)


def open_hunks_state(options: HunksOptions, settings: ABSettings) -> HunksState:
    repo = options.repo.resolve()
    head = resolve_ref(repo, options.head)
    if options.base:
        parent = merge_base(repo, resolve_ref(repo, options.base), head)
    else:
        parent = first_parent(repo, head) or ""
        if not parent:
            raise GateError(f"{head[:12]} is a root commit: give --base")
    path = options.out / HUNKS_STATE_FILE
    hunkset = python_hunks(repo, parent, head)
    if not hunkset.hunks:
        raise GateError(f"{head[:12]} changes no Python file of the vllm package against "
                        f"{parent[:12]}: no hunks to delta-debug")
    fresh = HunksState(
        repo=str(repo), plan_hash=settings.plan.measurement_hash(), hunks=hunkset.hunks,
        parent=CommitInfo(sha=parent, subject=commit_subject(repo, parent)),
        head=CommitInfo(sha=head, subject=commit_subject(repo, head)),
        builds=[InstalledBuild(
            commit=resolve_ref(repo, options.installed_commit or parent), python=options.python,
            package_dir=str(installed_package(options.python)))])
    stored = load_state(HunksState, path)
    if stored is None:
        return fresh
    check_same(stored, fresh, ("repo", "parent", "head", "plan_hash", "hunks"), path)
    stored.builds = usable_builds(stored.builds, fresh.builds[0])
    return stored


def _search(state: HunksState, checkpoint: Checkpoint, options: HunksOptions,
            settings: ABSettings, run: RunAB) -> Config | None:
    """Replay the stored outcomes; start the parent build's server only when a
    configuration is left to measure."""
    tester = _Tester(state, checkpoint, options, settings, run)
    try:
        return _plan(state, checkpoint, options.out, tester)
    except _Uncached:
        pass
    builds = StepBuilds(Path(state.repo), state.builds, options.install_mode,
                        on_install=lambda b: checkpoint.save())
    try:
        parent = builds.build(state.parent.sha, fresh_folder(options.out / "parent") / "build")
    except NotBuilt as exc:
        raise ReferenceBroken(str(exc)) from None
    with reference_server(settings, BuildUnderTest(parent.python, parent.env),
                          options.out / "parent") as reference:
        tester.start(builds, parent, reference)
        return _plan(state, checkpoint, options.out, tester)


def _plan(state: HunksState, checkpoint: Checkpoint, out: Path, tester: _Tester
          ) -> Config | None:
    if not tester(tuple(range(len(state.hunks)))):
        return None
    _order(state, checkpoint, out)
    if state.suspect is not None and tester((state.suspect,)):
        return (state.suspect,)
    return ddmin(state.order, tester)


def _order(state: HunksState, checkpoint: Checkpoint, out: Path) -> None:
    """The hunks in the order of the whole change's profile diff (once, then stored)."""
    if state.order:
        return
    whole = state.tests[0]
    state.order = list(range(len(state.hunks)))
    if whole.profile_diff and (out / whole.profile_diff).is_dir():
        diff, _ = load_written(out / whole.profile_diff)
        hunkset = HunkSet(repo=state.repo, base=state.parent.sha, head=state.head.sha,
                          merge_base=state.parent.sha, watch=["vllm/"], hunks=state.hunks)
        ranked = rank_hunks_by_evidence(hunkset, diff, Path(state.repo)).hunks
        state.order = [h.index for h in ranked]
        if ranked and ranked[0].tier != "none":
            state.suspect = ranked[0].index
    checkpoint.save()


class _Uncached(Exception):
    """A configuration not measured yet, while only replaying."""


class _Tester:
    """ddmin's test: does this set of hunks alone reproduce? Outcomes are stored and reused;
    until `start`, a configuration not measured before raises _Uncached."""

    def __init__(self, state: HunksState, checkpoint: Checkpoint, options: HunksOptions,
                 settings: ABSettings, run: RunAB):
        self.state, self.checkpoint, self.options = state, checkpoint, options
        self.settings, self.run = settings, run
        self.measuring = False

    def start(self, builds: StepBuilds, parent: CommitBuild, reference: ReferenceServer
              ) -> None:
        self.builds, self.parent, self.reference = builds, parent, reference
        self.measuring = True

    def cached(self, config: Config) -> bool | None:
        key = sorted(config)
        return next((t.reproduces for t in self.state.tests if sorted(t.hunks) == key), None)

    def __call__(self, config: Config) -> bool:
        known = self.cached(config)
        if known is not None:
            return known
        if not self.measuring:
            raise _Uncached()
        record = self._measure(config)
        self.state.tests.append(record)
        self.checkpoint.finished(record.seconds)
        return record.reproduces

    def _measure(self, config: Config) -> HunkTest:
        number = len(self.state.tests) + 1
        shown = ", ".join(str(i + 1) for i in sorted(config))
        self.settings.progress(f"hunks test {number}: hunk(s) {shown} over the parent")
        started = time.monotonic()
        folder = fresh_folder(self.options.out / "tests" / f"{number:02d}")
        fields = self._fields(config, folder)
        return HunkTest(**{**fields, "seconds": round(time.monotonic() - started, 1)},
                        number=number, hunks=sorted(config))

    def _fields(self, config: Config, folder: Path) -> dict:
        state = self.state
        try:
            files = apply_hunks(Path(state.repo), state.parent.sha, state.head.sha,
                                [state.hunks[i] for i in sorted(config)], folder / "files")
            build = self.builds.build(state.parent.sha, folder / "build", replace=files)
        except (GateError, NotBuilt) as exc:
            return {"reproduces": False, "reason": f"could not be built: {exc}"}
        modules = sorted({m for p in files if (m := module_name(p))})
        if problem := self.builds.import_problem(build, self.parent, modules):
            return {"reproduces": False, "reason": problem, "build": build.how}
        measured = decide(self.settings, self.reference.side,
                          BuildUnderTest(build.python, build.env), folder, self.run)
        out = self.options.out
        return {**measured.model_dump(), "build": build.how,
                "reproduces": measured.outcome == Outcome.FAIL,
                "folder": relative(measured.folder, out),
                "profile_diff": relative(measured.profile_diff, out)}


def _result(state: HunksState, minimal: Config | None, error: str | None = None
            ) -> HunksResult:
    seconds = round(state.overhead_s + sum(t.seconds for t in state.tests), 1)
    common = {"repo": state.repo, "parent": state.parent, "head": state.head,
              "hunks": state.hunks, "tests": state.tests, "runner_seconds": seconds}
    if error is not None:
        return HunksResult(**common, outcome=HunksOutcome.ERROR,
                           headline=f"ERROR: {error.splitlines()[0]}", notes=[error])
    if minimal is None:
        whole = state.tests[0] if state.tests else None
        return HunksResult(**common, outcome=HunksOutcome.NOT_REPRODUCED, headline=(
            f"NOT REPRODUCED: the {len(state.hunks)} Python hunk(s) of {state.head.short} "
            f"over its parent are not slower ({effect_text(whole.effect if whole else None)}"
            f"{'; ' + whole.reason if whole and whole.reason else ''})"))
    shown = ", ".join(f"{state.hunks[i].path}:{state.hunks[i].new_start}" for i in minimal)
    return HunksResult(**common, outcome=HunksOutcome.FOUND, minimal=sorted(minimal), headline=(
        f"FOUND: {len(minimal)} of {len(state.hunks)} hunk(s) reproduce the slowdown alone: "
        f"{shown}"))


def _save(result: HunksResult, out: Path) -> HunksResult:
    write_atomic(out / RESULT_FILE, result.model_dump_json(indent=1))
    write_atomic(out / REPORT_FILE, render_hunks(result))
    return result
