"""`gate bisect --good G --bad B`: the first commit of B's first-parent history after G whose
build is slower than G's (docs/bisect.md).

1. Confirm the endpoints: an A/B of the bad commit against the good build must fail; when it
   passes (or stays inconclusive) the bisect stops there and says so.
2. Step: the commit gate.evidence.bisection picks, built the cheapest way
   (gate.flows.bisect_builds), checked to import, then A/B'd against the good build until
   decided within the step's budget (gate.flows.bisect_ab). A commit that cannot be built,
   imported or served, or stays inconclusive, is skipped: never blamed.
3. With --hunks: delta debugging of the first bad commit's hunks against the good build, in
   the same session (gate.flows.bisect_hunks).
4. The result: the first bad commit, its hunks ranked by the profile diff of its step (and
   the smallest slow set of them), every step, the runner time (gate.flows.bisect_result).
   bisect.json and bisect.md.

The state (bisect-state.json) is saved after every finished step, so a cancelled bisect run
again with the same arguments goes on where it stopped and never measures a finished step
again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gate.core.errors import GateError
from gate.core.git import commit_subject, first_parent_commits, resolve_ref
from gate.evidence.bisect_record import (
    BisectResult,
    BisectState,
    CommitInfo,
    HunksResult,
    HunksState,
    StepRecord,
)
from gate.evidence.bisection import StepVerdict, conclude, next_commit, step_verdict
from gate.flows.bisect_ab import ABRunner, ABSettings, BuildUnderTest, ReferenceBroken, decide
from gate.flows.bisect_builds import NotBuilt, StepBuilds, fresh_folder
from gate.flows.bisect_hunks import after_bisect_state, hunks_after_bisect
from gate.flows.bisect_result import error_result, finish
from gate.flows.bisect_state import (
    STATE_FILE,
    Checkpoint,
    check_same,
    commits_from_git,
    load_state,
    relative,
    usable_builds,
)
from gate.flows.hunk_search import HunkReference, Uncached
from gate.runner.commit_build import CommitBuild, InstalledBuild, InstallMode
from gate.runner.overlay import installed_package

DEFAULT_WATCH = ["**"]


@dataclass
class BisectOptions:
    repo: Path
    good: str
    bad: str
    out: Path
    python: str  # the interpreter of the installed build the overlays go over
    installed_commit: str | None = None  # the commit that build is from (default: good)
    install_mode: InstallMode = "precompiled"
    watch: list[str] = field(default_factory=lambda: list(DEFAULT_WATCH))
    then_hunks: bool = False  # delta-debug the first bad commit's hunks (gate.flows.bisect_hunks)
    reuse_builds: bool = False  # a resumed state's installed builds: this folder is our own


def bisect(options: BisectOptions, settings: ABSettings, run: ABRunner | None = None
           ) -> BisectResult:
    """Run (or resume) the bisect; writes the state as it goes and the result at the end."""
    state = open_state(options, settings)
    checkpoint = Checkpoint(state, options.out / STATE_FILE)
    checkpoint.save()
    chain = _Chain(options, settings, run or ABRunner())
    if _pending(state) or chain.pending(state):
        try:
            _measure(state, checkpoint, options, chain)
        except ReferenceBroken as exc:
            checkpoint.save()
            return error_result(state, options.out, f"the good build could not be measured: {exc}")
    checkpoint.save()
    return finish(state, options.out, options.watch, chain.result)


def open_state(options: BisectOptions, settings: ABSettings) -> BisectState:
    """The stored state of this bisect, or a new one; another bisect's state is an error."""
    repo = options.repo.resolve()
    good, bad = resolve_ref(repo, options.good), resolve_ref(repo, options.bad)
    base = InstalledBuild(commit=resolve_ref(repo, options.installed_commit or good),
                          python=options.python,
                          package_dir=str(installed_package(options.python)))
    path = options.out / STATE_FILE
    stored = load_state(BisectState, path)
    plan_hash = settings.plan.measurement_hash()
    commits = [CommitInfo(sha=c, subject=commit_subject(repo, c))
               for c in first_parent_commits(repo, good, bad)]
    ends = {"good": CommitInfo(sha=good, subject=commit_subject(repo, good)),
            "bad": CommitInfo(sha=bad, subject=commit_subject(repo, bad))}
    if stored is not None:
        wanted = stored.model_copy(update={
            "repo": str(repo), "plan_hash": plan_hash,
            "good": CommitInfo(sha=good, subject=stored.good.subject),
            "bad": CommitInfo(sha=bad, subject=stored.bad.subject)})
        check_same(stored, wanted, ("repo", "good", "bad", "plan_hash"), path)
        commits_from_git(stored, commits, path)
        stored.good, stored.bad = ends["good"], ends["bad"]
        stored.builds = usable_builds(stored.builds, base, reuse=options.reuse_builds)
        return stored
    return BisectState(repo=str(repo), plan_hash=plan_hash, builds=[base], commits=commits,
                       **ends)


def _verdicts(state: BisectState) -> dict[str, StepVerdict]:
    return {s.commit: s.verdict for s in state.steps}


def _pending(state: BisectState) -> bool:
    endpoints = [s for s in state.steps if s.role == "endpoints"]
    if not endpoints:
        return True
    return endpoints[0].verdict == StepVerdict.BAD and _next(state) is not None


def _next(state: BisectState) -> str | None:
    return next_commit([c.sha for c in state.commits], _verdicts(state))


@dataclass
class _Steps:
    """What every step of this session uses."""

    state: BisectState
    out: Path
    settings: ABSettings
    builds: StepBuilds
    good: CommitBuild
    run: ABRunner

    def measure(self, commit: str, role: Literal["endpoints", "step"]) -> StepRecord:
        number = len(self.state.steps) + 1
        subject = next((c.subject for c in self.state.commits if c.sha == commit), "")
        self.settings.progress(f"bisect step {number} ({role}): {commit[:12]} {subject}")
        started = time.monotonic()
        folder = fresh_folder(self.out / "steps" / f"{number:02d}-{commit[:12]}")
        record = self._measure(commit, folder)
        return StepRecord(**{**record, "seconds": round(time.monotonic() - started, 1)},
                          number=number, commit=commit, subject=subject, role=role)

    def _measure(self, commit: str, folder: Path) -> dict:
        try:
            build = self.builds.build(commit, folder / "build")
        except NotBuilt as exc:
            return {"verdict": StepVerdict.SKIPPED, "reason": f"could not be built: {exc}"}
        modules = self.builds.changed_modules(self.good.commit, commit)
        if problem := self.builds.import_problem(build, self.good, modules):
            return {"verdict": StepVerdict.SKIPPED, "reason": problem, "build": build.how}
        measured = decide(self.settings, base=BuildUnderTest(self.good.python, self.good.env),
                          head=BuildUnderTest(build.python, build.env), folder=folder,
                          runner=self.run)
        return {**measured.model_dump(), "build": build.how,
                "verdict": step_verdict(measured.outcome, measured.screened),
                "folder": relative(measured.folder, self.out),
                "profile_diff": relative(measured.profile_diff, self.out)}


def _measure(state: BisectState, checkpoint: Checkpoint, options: BisectOptions,
             chain: _Chain) -> None:
    settings, run = chain.settings, chain.run
    builds = StepBuilds(options.repo.resolve(), state.builds, options.install_mode,
                        on_install=lambda b: checkpoint.save())
    try:
        good = builds.build(state.good.sha, fresh_folder(options.out / "good") / "build")
    except NotBuilt as exc:
        raise ReferenceBroken(str(exc)) from None
    _walk(_Steps(state, options.out, settings, builds, good, run), checkpoint)
    chain.run_after(state, HunkReference(builds, good))


class _Chain:
    """With --hunks after a bisect: delta debugging of the first bad commit's hunks against
    the good build, in the same session, resumable like the steps."""

    def __init__(self, options: BisectOptions, settings: ABSettings, run: ABRunner):
        self.options, self.settings, self.run = options, settings, run
        self.result: HunksResult | None = None

    def _state(self, state: BisectState) -> HunksState | None:
        if not self.options.then_hunks or _pending(state):
            return None
        culprit = conclude([c.sha for c in state.commits], _verdicts(state)).first_bad
        record = next((s for s in state.steps if s.commit == culprit), None)
        if record is None or record.verdict != StepVerdict.BAD:
            return None
        try:
            return after_bisect_state(state, record, self.options.out, self.settings)
        except GateError as exc:  # no Python hunks: nothing to take apart
            self.settings.progress(f"no delta debugging of the first bad commit: {exc}")
            return None

    def pending(self, state: BisectState) -> bool:
        """Whether a hunk configuration is left to measure (the result, when none is)."""
        return self._replay(state, None)

    def run_after(self, state: BisectState, reference: HunkReference) -> None:
        self._replay(state, reference)

    def _replay(self, state: BisectState, reference: HunkReference | None) -> bool:
        hunks = self._state(state)
        if hunks is None:
            return False
        try:
            self.result = hunks_after_bisect(hunks, self.options.out, self.settings, self.run,
                                             reference)
        except Uncached:
            return True
        return False


def _walk(steps: _Steps, checkpoint: Checkpoint) -> None:
    state = steps.state
    if not any(s.role == "endpoints" for s in state.steps):
        _keep(state, checkpoint, steps.measure(state.bad.sha, "endpoints"))
        if state.steps[-1].verdict != StepVerdict.BAD:
            return
    while (commit := _next(state)) is not None:
        _keep(state, checkpoint, steps.measure(commit, "step"))


def _keep(state: BisectState, checkpoint: Checkpoint, record: StepRecord) -> None:
    state.steps.append(record)
    checkpoint.finished(record.seconds)
