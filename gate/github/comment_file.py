"""gate-comment.json: the hand-over from a measuring job to the comment poster.

The measuring job ran PR code, so this file is untrusted data. It carries what the comment is
made of (each run's verdict, its results without request records, its hunks, each check's
nights on the default branch, the sequential test look by look) and where it goes (PR number,
marker id), never the comment's text: the poster validates every field here and renders the
comment itself (gate.report.render.render_comment). Where the comment goes is the poster's to
say: it takes the PR and the marker id from its own workflow and refuses a file that names
others. An acknowledgement the file's verdict claims must be one the poster's own copy of the
history holds for the measured head (`with_acknowledgements`). A matrix's aggregation job
combines its runners' files into one, each run under its runner's label.

Version 3 added the nights and the looks (`history`, `trajectories`): a version-2 file is
refused as such (core.files.load_json_model), as a version-3 file is by a gate that reads 2.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gate.core.errors import GateError
from gate.core.files import load_json_model
from gate.core.settings import MARKER_ID_RE, check_marker_id
from gate.evidence.attribution import Evidence
from gate.evidence.hunks import HunkSet
from gate.history.store import opened
from gate.judge import acknowledge as ack
from gate.judge.looks import Trajectory
from gate.judge.verdict import SEVERITY, Outcome, Verdict
from gate.measure.results import Results
from gate.profile.diff_file import ProfileDiff
from gate.report.view import RunInput

COMMENT_FILE_VERSION = 3
MAX_RUNS = 16  # runner types in one matrix comment
MAX_COMMENT_FILE_BYTES = 64 * 2**20
MAX_CHECKS = 256  # checks with nights or looks, per run
MAX_NIGHTS = 30  # the comment's sparkline: the last 30 nights (gate report --history)
MAX_LOOKS = 64
CHECK_NAME = re.compile(r"[a-z0-9_]+(\.[a-z0-9_]+)+")


class CommentRun(BaseModel):
    """One measured run as the comment shows it. Read back from a file a run of PR code
    wrote: every field is validated here and escaped when rendered."""

    model_config = ConfigDict(extra="forbid")

    label: str | None = Field(None, description="the runner's name in a matrix comment")
    verdict: Verdict
    head: Results | None = Field(None, description="head results, without request records")
    base: Results | None = None
    hunks: HunkSet | None = None
    profile_diff: ProfileDiff | None = Field(None, description="gate profile diff of the builds")
    evidence: Evidence | None = Field(None, description="the hunks ranked by its added time")
    history: dict[str, list[float]] | None = Field(
        None, description="each check's last nights on the default branch (its sparkline)")
    trajectories: list[Trajectory] | None = Field(
        None, description="the A/B's sequential test look by look, as gate report replays it")

    @field_validator("history")
    @classmethod
    def _nights(cls, value: dict[str, list[float]] | None) -> dict[str, list[float]] | None:
        if value is None:
            return value
        if len(value) > MAX_CHECKS or not all(CHECK_NAME.fullmatch(k) for k in value):
            raise ValueError(f"history: at most {MAX_CHECKS} check names (like drain.req_per_min)")
        if any(len(v) > MAX_NIGHTS or not all(map(math.isfinite, v)) for v in value.values()):
            raise ValueError(f"history: at most {MAX_NIGHTS} finite figures per check")
        return value

    @field_validator("trajectories")
    @classmethod
    def _looks(cls, value: list[Trajectory] | None) -> list[Trajectory] | None:
        if value is None:
            return value
        if len(value) > MAX_CHECKS or any(not 1 <= len(t.looks) <= MAX_LOOKS for t in value):
            raise ValueError(f"trajectories: at most {MAX_CHECKS}, each of 1 to {MAX_LOOKS} looks")
        figures = [x for t in value for x in (t.threshold_pct, *(f for lk in t.looks for f in (
            lk.delta_pct, lk.low_pct, lk.high_pct) if f is not None))]
        if not all(map(math.isfinite, figures)):
            raise ValueError("trajectories: every figure must be finite")
        return value

    @field_validator("label")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        if value is not None and not MARKER_ID_RE.fullmatch(value):
            raise ValueError("label must be 1-64 characters of letters, digits, '_', '.', '-'")
        return value

    def run_input(self) -> RunInput:
        return RunInput(verdict=self.verdict, head=self.head, base=self.base, hunks=self.hunks,
                        label=self.label, profile_diff=self.profile_diff, evidence=self.evidence,
                        history=self.history, trajectories=self.trajectories)


def slim(results: Results | None) -> Results | None:
    """Results as the comment needs them: the per-request records stay in the artifact."""
    return None if results is None else results.model_copy(update={"records": []})


class CommentFile(BaseModel):
    """gate-comment.json: what the comment is made of (never its text) and where it goes."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[3] = 3  # COMMENT_FILE_VERSION: a Literal needs the value itself
    pr: int | None = Field(None, gt=0, description="None when the run had no PR number")
    marker_id: str = "default"
    runs: list[CommentRun] = Field(min_length=1, max_length=MAX_RUNS)
    reason: str = Field("", description="why the comment was not posted directly")

    @field_validator("pr", mode="before")
    @classmethod
    def _strict_int(cls, value: object) -> object:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError("pr must be a JSON integer")
        return value

    @field_validator("marker_id")
    @classmethod
    def _marker(cls, value: str) -> str:
        try:
            return check_marker_id(value)
        except GateError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _labels(self) -> CommentFile:
        labels = [r.label for r in self.runs]
        if len(self.runs) > 1 and (None in labels or len(set(labels)) != len(labels)):
            raise ValueError("the runs of a matrix comment need distinct labels")
        return self

    @property
    def outcome(self) -> Outcome:
        return worst_verdict([r.verdict for r in self.runs]).outcome


def load_comment_file(path: Path) -> CommentFile:
    if path.is_file() and path.stat().st_size > MAX_COMMENT_FILE_BYTES:
        raise GateError(f"comment file {path} is over {MAX_COMMENT_FILE_BYTES // 2**20} MiB")
    return load_json_model(CommentFile, path, "comment file")


def worst_verdict(verdicts: list[Verdict]) -> Verdict:
    return min(verdicts, key=lambda v: SEVERITY.index(v.outcome))


def combine(paths: list[Path], labels: list[str] | None = None) -> list[CommentRun]:
    """A matrix comment's runs: one runner's comment file each, labelled (default: the
    folder the file is in, e.g. perf-gate-results-a100)."""
    if labels and len(labels) != len(paths):
        raise GateError("give one --label per --combine file (or none)")
    runs = []
    for i, path in enumerate(paths):
        handover = load_comment_file(path)
        if len(handover.runs) != 1:
            raise GateError(f"{path} already holds {len(handover.runs)} runs; give each one")
        label = labels[i] if labels else path.parent.name
        runs.append(CommentRun.model_validate({**handover.runs[0].model_dump(), "label": label}))
    return runs


def with_acknowledgements(handover: CommentFile, history: Path | None, *, pr: int,
                          head_sha: str | None, repository: str) -> CommentFile:
    """The hand-over with the acknowledgements of `head_sha` applied, from the poster's own
    copy of the history (fetched read-only where no code under test ran). The measuring job
    applies them too, for its check; what it wrote is untrusted, so an acknowledgement its
    verdict claims must be one this history holds for this PR's measured head, or nothing is
    posted; those given since it ran are applied here."""
    if history is not None and head_sha is None:
        raise GateError("--history needs --expect-head-sha: acknowledgements are per head commit")
    acks = kept_acknowledgements(history, pr, repository) if history is not None else []
    runs = []
    for r in handover.runs:
        if claimed := ack.unheld(r.verdict, acks, head_sha or ""):
            where = (f"{history} does not hold" if history
                     else "only the history (--history) can confirm")
            raise GateError(f"the comment file claims acknowledgements of {', '.join(claimed)} "
                            f"that {where} for PR #{pr} at {head_sha}: refusing to post")
        verdict = ack.apply_acknowledgements(r.verdict, acks, head_sha) if head_sha else r.verdict
        runs.append(r.model_copy(update={"verdict": verdict}))
    return handover.model_copy(update={"runs": runs})


def kept_acknowledgements(history: Path, pr: int, repository: str) -> list[ack.Acknowledgement]:
    """The acknowledgements of PR `pr` of this repository that the history file keeps."""
    with opened(history) as store:
        return [ack.Acknowledgement(check=a.check, login=a.login, reason=a.reason,
                                    head_sha=a.head_sha, at=a.created_at)
                for a in store.acknowledgements(pr=pr)
                if a.repository.lower() == repository.lower()]
