"""verdict.json: the seam between `gate compare` and `gate report`/`gate publish`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gate.core.errors import (
    EXIT_ERROR,
    EXIT_FAIL,
    EXIT_INCONCLUSIVE,
    EXIT_PASS,
    EXIT_UNDECIDED,
)
from gate.core.files import load_json_model, write_atomic
from gate.core.text import one_line

VERDICT_SCHEMA_VERSION = 1
MODES = ("baseline", "ab", "absolute")


class Outcome(str, Enum):
    """A verdict's outcome. Two of them are not decided, and neither is a pass:
    `inconclusive` (the sequential test ran out of its rounds or budget: `gate ab --resume`
    adds blocks to the same test) and `undecided` (this runner cannot decide the plan's
    thresholds yet: no calibration, or one too noisy, or a budget too small for the design;
    a screening block may have looked for gross effects; `decide_with` says what would)."""

    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    UNDECIDED = "undecided"
    ERROR = "error"

    @property
    def exit_code(self) -> int:
        return {
            Outcome.PASS: EXIT_PASS,
            Outcome.FAIL: EXIT_FAIL,
            Outcome.INCONCLUSIVE: EXIT_INCONCLUSIVE,
            Outcome.UNDECIDED: EXIT_UNDECIDED,
            Outcome.ERROR: EXIT_ERROR,
        }[self]

    @property
    def decided(self) -> bool:
        return self in (Outcome.PASS, Outcome.FAIL)


# Worst first: the overall outcome is the worst outcome of any check.
SEVERITY = [Outcome.ERROR, Outcome.FAIL, Outcome.UNDECIDED, Outcome.INCONCLUSIVE, Outcome.PASS]


def worst(outcomes: list[Outcome]) -> Outcome:
    for outcome in SEVERITY:
        if outcome in outcomes:
            return outcome
    return Outcome.PASS


# How a screened check's interval_source starts (judge.compare.ScreeningReference).
SCREENING_SOURCE = "screening:"


class Acknowledged(BaseModel):
    """A maintainer's acknowledgement of this check's slowdown for this head commit
    (gate history acknowledge): the check stays as measured, and is neutral in the outcome."""

    model_config = ConfigDict(extra="forbid")

    login: str
    reason: str
    head_sha: str
    at: str = ""


class Check(BaseModel):
    """One judged figure. Relative checks carry base/head and a delta interval in percent;
    absolute checks (guided/free ratio, validity) carry only `head` against `threshold`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="stable id, e.g. drain.req_per_min or sweep.c8.tpot_p50_ms")
    label: str = Field(description="what a person reads, e.g. 'TPOT p50 (guided, c=8)'")
    kind: Literal["relative", "absolute", "validity"]
    direction: Literal["higher_is_better", "lower_is_better"]
    unit: str = ""
    concurrency: int | None = None
    arm: str | None = None
    base: float | None = None
    head: float | None = None
    delta_pct: float | None = Field(None, description="(head - base) / base * 100")
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    ci_low: float | None = Field(None, description="absolute checks: interval of `head`, low end")
    ci_high: float | None = Field(None, description="absolute checks: interval of `head`, high end")
    threshold: float = Field(description="percent for relative checks; the bound for absolute")
    head_n: int | None = Field(None, description="independent measurements (repeats) on the head side")
    base_n: int | None = Field(None, description="independent measurements on the base side")
    interval_source: str = Field("", description="how the interval was obtained for this check")
    decided_at_round: int | None = Field(
        None, description="A/B: the round (look) at which the sequential test settled it"
    )
    outcome: Outcome
    improved: bool = Field(
        False, description="a decided improvement past the threshold: the head better than the "
        "base by more than the threshold, its whole interval (or every screened round) beyond "
        "it in the good direction (gate.judge.improvement); its outcome is pass")
    note: str = ""
    acknowledged: Acknowledged | None = Field(
        None, description="an intended slowdown: counted as neutral in the verdict's outcome")

    @property
    def interval_is_range(self) -> bool:
        """A screened check (no calibration): its low and high ends are the smallest and largest
        change of its rounds, not a confidence interval, and every display says so."""
        return self.interval_source.startswith(SCREENING_SOURCE)


class ReportedFigure(BaseModel):
    """A figure of a reported baseline (someone else's harness, prompts and schema) beside the
    one this run measured: shown, never judged."""

    model_config = ConfigDict(extra="forbid")

    name: str
    label: str
    unit: str = ""
    reported: float
    measured: float | None = None
    delta_pct: float | None = None


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = VERDICT_SCHEMA_VERSION
    outcome: Outcome
    headline: str = Field(description="one line, verdict first")
    mode: Literal["baseline", "ab", "absolute"]
    head_results: str | None = None
    base_results: str | None = Field(None, description="A/B: the base build's results.json")
    baseline: str | None = Field(None, description="baseline mode: the baseline file")
    checks: list[Check] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    advice: list[str] = Field(default_factory=list, description="what to do next")
    warnings: list[str] = Field(default_factory=list, description="environment warnings")
    method: str = Field("", description="how intervals were computed")
    noise_profile: str = Field(
        "", description="the noise profile the intervals used, or why the fallback constant"
    )
    notes: list[str] = Field(
        default_factory=list, description="what was not compared and why (missing figures, ...)"
    )
    thresholds: dict[str, Any] | None = Field(None, description="the thresholds applied")
    rounds: int | None = Field(None, description="A/B: rounds measured on each build")
    decide_with: str | None = Field(
        None, description="undecided: the command, threshold or budget that would decide on "
        "this runner")
    reported: list[ReportedFigure] = Field(
        default_factory=list, description="baseline mode with a reported baseline: its figures "
        "beside this run's, not judged (the source: `baseline`, and a note)")
    earlier_test: str | None = Field(
        None, description="a rerun: what it did with this commit's earlier test (continued "
        "it, kept its decided verdict, or started a new one) and where that test started")
    runner_seconds: dict[str, float] = Field(
        default_factory=dict,
        description="A/B: where the runner's time went, both builds together (startup, "
        "warmup, drain, sweep, shutdown, wall)",
    )

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code


def error_verdict(reason: str, mode: str) -> Verdict:
    """The verdict of a run that could not be judged at all (`gate verdict --error`)."""
    reason = one_line(reason, 1000) or "no verdict could be computed"
    return Verdict(outcome=Outcome.ERROR, headline=f"ERROR: {reason}", mode=mode, errors=[reason])


def undecided_verdict(reason: str, *, decide_with: str | None = None, mode: str = "ab"
                      ) -> Verdict:
    """The verdict of an A/B that stopped before measuring anything it could decide (a budget
    the design does not fit, no screening asked for)."""
    reason = one_line(reason, 1000)
    return Verdict(outcome=Outcome.UNDECIDED, headline=f"UNDECIDED: {reason}", mode=mode,
                   decide_with=decide_with, advice=[decide_with] if decide_with else [])


def save_verdict(verdict: Verdict, path: str | Path) -> Path:
    """verdict.json, written atomically (the one writer of verdict files)."""
    write_atomic(Path(path), verdict.model_dump_json(indent=1) + "\n")
    return Path(path)


def load_verdict(path: str | Path) -> Verdict:
    return load_json_model(Verdict, Path(path), "verdict file")
