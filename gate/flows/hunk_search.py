"""The search over one change's hunks (docs/bisect.md#the-smallest-set-of-hunks): the whole
change first (ddmin's premise), then the hunk its profile diff blames alone, then ddmin over
the hunks in the evidence's order; each configuration is the parent's build with only those
hunks applied (gate.evidence.hunk_patch), A/B'd against the reference build.

Every configuration's outcome is stored in the state; ddmin is deterministic, so a resumed
search replays the stored outcomes, and `Tester` raises `Uncached` at the first configuration
not measured yet until `start` gives it a reference to measure against: the caller makes
the reference build only when something is left to measure."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from gate.core.errors import GateError
from gate.core.files import write_atomic
from gate.evidence.attribution import rank_hunks_by_evidence
from gate.evidence.bisect_record import HunksOutcome, HunksResult, HunksState, HunkTest
from gate.evidence.ddmin import Config, ddmin
from gate.evidence.hunk_patch import apply_hunks
from gate.evidence.hunks import HunkSet
from gate.flows.ab import Profiling
from gate.flows.bisect_ab import ABRunner, ABSettings, BuildUnderTest, decide
from gate.flows.bisect_builds import NotBuilt, StepBuilds, fresh_folder
from gate.flows.bisect_result import effect_text
from gate.flows.bisect_state import Checkpoint, relative
from gate.flows.diff_artifacts import load_written
from gate.judge.verdict import Outcome
from gate.report.bisect import render_hunks
from gate.runner.commit_build import CommitBuild
from gate.runner.overlay import module_name

RESULT_FILE = "hunks-bisect.json"
REPORT_FILE = "hunks-bisect.md"


@dataclass
class HunkReference:
    """What configurations are measured against: the builds made so far (configurations
    are overlays over them) and the reference build."""

    builds: StepBuilds
    build: CommitBuild

    @property
    def side(self) -> BuildUnderTest:
        return BuildUnderTest(self.build.python, self.build.env)


def search(state: HunksState, checkpoint: Checkpoint, out: Path, tester: Tester
           ) -> Config | None:
    """The smallest set of hunks that reproduces; None when the whole change does not."""
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


class Uncached(Exception):
    """A configuration not measured yet, while only replaying."""


class Tester:
    """ddmin's test: does this set of hunks alone reproduce? Outcomes are stored and reused;
    until `start`, a configuration not measured before raises Uncached."""

    def __init__(self, state: HunksState, checkpoint: Checkpoint, out: Path,
                 settings: ABSettings, run: ABRunner):
        self.state, self.checkpoint, self.out = state, checkpoint, out
        self.settings, self.run = settings, run
        self.reference: HunkReference | None = None

    def start(self, reference: HunkReference) -> None:
        self.reference = reference

    def cached(self, config: Config) -> bool | None:
        key = sorted(config)
        return next((t.reproduces for t in self.state.tests if sorted(t.hunks) == key), None)

    def __call__(self, config: Config) -> bool:
        known = self.cached(config)
        if known is not None:
            return known
        if self.reference is None:
            raise Uncached()
        record = self._measure(config, self.reference)
        self.state.tests.append(record)
        self.checkpoint.finished(record.seconds)
        return record.reproduces

    def _measure(self, config: Config, reference: HunkReference) -> HunkTest:
        number = len(self.state.tests) + 1
        shown = ", ".join(str(i + 1) for i in sorted(config))
        self.settings.progress(f"hunks test {number}: hunk(s) {shown} over the parent")
        started = time.monotonic()
        folder = fresh_folder(self.out / "tests" / f"{number:02d}")
        fields = self._fields(config, folder, reference)
        return HunkTest(**{**fields, "seconds": round(time.monotonic() - started, 1)},
                        number=number, hunks=sorted(config))

    def _settings_for(self, done: int) -> ABSettings:
        """Only the whole change's profile is read (it orders the hunks, `_order`): a test of
        a subset skips profiling, which costs both builds' sampling windows after its rounds."""
        if done == 0:
            return self.settings
        return replace(self.settings, profiling=Profiling(policy="never"))

    def _fields(self, config: Config, folder: Path, reference: HunkReference) -> dict:
        state = self.state
        try:
            files = apply_hunks(Path(state.repo), state.parent.sha, state.head.sha,
                                [state.hunks[i] for i in sorted(config)], folder / "files")
            build = reference.builds.build(state.parent.sha, folder / "build", replace=files)
        except (GateError, NotBuilt) as exc:
            return {"reproduces": False, "reason": f"could not be built: {exc}"}
        modules = sorted({m for p in files if (m := module_name(p))})
        if problem := reference.builds.import_problem(build, reference.build, modules):
            return {"reproduces": False, "reason": problem, "build": build.how}
        measured = decide(self._settings_for(len(state.tests)), base=reference.side,
                          head=BuildUnderTest(build.python, build.env), folder=folder,
                          runner=self.run)
        return {**measured.model_dump(), "build": build.how,
                "reproduces": measured.outcome == Outcome.FAIL,
                "folder": relative(measured.folder, self.out),
                "profile_diff": relative(measured.profile_diff, self.out)}


def result(state: HunksState, minimal: Config | None, error: str | None = None
           ) -> HunksResult:
    seconds = round(state.overhead_s + sum(t.seconds for t in state.tests), 1)
    common = {"repo": state.repo, "parent": state.parent, "head": state.head,
              "hunks": state.hunks, "tests": state.tests, "runner_seconds": seconds,
              "reference": state.reference}
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


def save(result: HunksResult, out: Path) -> HunksResult:
    write_atomic(out / RESULT_FILE, result.model_dump_json(indent=1))
    write_atomic(out / REPORT_FILE, render_hunks(result))
    return result
