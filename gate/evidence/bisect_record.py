"""The files of `gate bisect` (docs/bisect.md#files): the state it resumes from and the
result it hands to the report, for a bisect over commits (bisect-state.json, bisect.json)
and for delta debugging over one change's hunks (hunks-state.json, hunks-bisect.json)."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gate.core.errors import (
    EXIT_ERROR,
    EXIT_FAIL,
    EXIT_INCONCLUSIVE,
    EXIT_PASS,
    EXIT_UNDECIDED,
)
from gate.evidence.bisection import Effect, StepVerdict
from gate.evidence.hunks import Hunk, HunkSet
from gate.judge.verdict import Outcome
from gate.runner.commit_build import InstalledBuild

BISECT_SCHEMA_VERSION = 1


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# A commit as git names it (SHA-1, or SHA-256 repositories): a state or result read back from
# an artifact can put nothing else where a commit goes in the report.
COMMIT_PATTERN = r"^[0-9a-f]{40}([0-9a-f]{24})?$"


class CommitInfo(Strict):
    sha: str = Field(pattern=COMMIT_PATTERN)
    subject: str = ""

    @property
    def short(self) -> str:
        return self.sha[:12]


class Measured(Strict):
    """What one A/B (or its repeats within the step's budget) of a build found."""

    outcome: Outcome | None = Field(None, description="the A/B's outcome; None: not measured, "
                                    "or screened")
    screened: bool = Field(False, description="no calibration for the plan on this runner: one "
                           "block screened for gross slowdowns found none (nothing passes)")
    effect: Effect | None = None
    rounds: int = Field(0, description="A/B rounds, summed over the attempts")
    attempts: int = 0
    seconds: float = Field(0.0, description="runner wall time of the step: build and A/Bs")
    build: str = Field("", description="how the build was made")
    folder: str = Field("", description="its A/B folders, relative to the bisect's folder")
    profile_diff: str | None = Field(None, description="the profile diff folder, relative")
    reason: str = Field("", description="why it was skipped or unresolved")


class StepRecord(Measured):
    number: int
    commit: str = Field(pattern=COMMIT_PATTERN)
    subject: str = Field("", description="the commit's subject, for the report's table")
    role: Literal["endpoints", "step"] = Field(
        "step", description="endpoints: the bad commit confirmed against the good build")
    verdict: StepVerdict


class BisectState(Strict):
    """Everything a cancelled bisect needs to go on without measuring a finished step again."""

    schema_version: int = BISECT_SCHEMA_VERSION
    repo: str
    good: CommitInfo
    bad: CommitInfo
    plan_hash: str
    commits: list[CommitInfo]
    steps: list[StepRecord] = Field(default_factory=list)
    builds: list[InstalledBuild] = Field(default_factory=list,
                                         description="installed builds overlays can go over")
    overhead_s: float = Field(0.0, description="runner time outside the steps: the good "
                              "build's server start-ups")


class BisectOutcome(str, Enum):
    FOUND = "found"  # the first bad commit is named
    NO_REGRESSION = "no_regression"  # good and bad do not differ: nothing to bisect
    INCONCLUSIVE = "inconclusive"  # good against bad stayed inconclusive
    UNCALIBRATED = "uncalibrated"  # no calibration, and bad is not grossly slower than good
    UNDECIDED = "undecided"  # the first bad commit is one of several skipped ones
    ERROR = "error"  # the good (or bad) build could not be measured

    @property
    def exit_code(self) -> int:
        return {BisectOutcome.FOUND: EXIT_FAIL, BisectOutcome.NO_REGRESSION: EXIT_PASS,
                BisectOutcome.INCONCLUSIVE: EXIT_INCONCLUSIVE,
                BisectOutcome.UNCALIBRATED: EXIT_UNDECIDED,
                BisectOutcome.UNDECIDED: EXIT_INCONCLUSIVE,
                BisectOutcome.ERROR: EXIT_ERROR}[self]


class BisectResult(Strict):
    schema_version: int = BISECT_SCHEMA_VERSION
    kind: Literal["commits"] = "commits"
    outcome: BisectOutcome
    headline: str
    repo: str
    good: CommitInfo
    bad: CommitInfo
    first_bad: CommitInfo | None = None
    candidates: list[CommitInfo] = Field(default_factory=list,
                                         description="undecided: where the first bad may be")
    skipped: list[CommitInfo] = Field(default_factory=list,
                                      description="commits that could not be decided")
    hunks: HunkSet | None = Field(None, description="the first bad commit's hunks, ranked by "
                                  "the profile diff of its step (patterns when none)")
    hunks_ranked_by: str = ""
    smallest_hunks: list[Hunk] = Field(
        default_factory=list, description="with --hunks: the first bad commit's smallest set "
        "of hunks that reproduces the slowdown (hunks-bisect.json has the search)")
    smallest_hunks_headline: str = ""
    steps: list[StepRecord] = Field(default_factory=list)
    runner_seconds: float = Field(0.0, description="the whole bisect, every session")
    notes: list[str] = Field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code


class HunkTest(Measured):
    """One configuration ddmin tried: these hunks alone over the parent build."""

    number: int
    hunks: list[int] = Field(description="indices into the run's hunks")
    reproduces: bool


class HunksState(Strict):
    schema_version: int = BISECT_SCHEMA_VERSION
    repo: str
    parent: CommitInfo
    head: CommitInfo
    plan_hash: str
    hunks: list[Hunk] = Field(description="the elements: hunks of the package's Python files")
    order: list[int] = Field(default_factory=list, description="the order ddmin tries them "
                             "in: measured evidence first (set after the whole change's test)")
    suspect: int | None = Field(None, description="the hunk the profile diff blames: tried "
                                "alone first")
    reference: str = Field("the parent build", description="what configurations are A/B'd "
                           "against")
    tests: list[HunkTest] = Field(default_factory=list)
    builds: list[InstalledBuild] = Field(default_factory=list)
    overhead_s: float = 0.0


class HunksOutcome(str, Enum):
    FOUND = "found"  # a 1-minimal set of hunks reproduces the slowdown
    NOT_REPRODUCED = "not_reproduced"  # the change's Python hunks together do not
    ERROR = "error"

    @property
    def exit_code(self) -> int:
        return {HunksOutcome.FOUND: EXIT_FAIL, HunksOutcome.NOT_REPRODUCED: EXIT_INCONCLUSIVE,
                HunksOutcome.ERROR: EXIT_ERROR}[self]


class HunksResult(Strict):
    schema_version: int = BISECT_SCHEMA_VERSION
    kind: Literal["hunks"] = "hunks"
    outcome: HunksOutcome
    headline: str
    repo: str
    parent: CommitInfo
    head: CommitInfo
    hunks: list[Hunk]
    minimal: list[int] = Field(default_factory=list, description="indices into hunks")
    reference: str = "the parent build"
    tests: list[HunkTest] = Field(default_factory=list)
    runner_seconds: float = 0.0
    notes: list[str] = Field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code
