"""What the history holds and what detection finds in it, as typed values.

A `Series` is one check of one plan on one runner class, night by night in the order of the
default branch. `detect` turns each into a `SeriesDetection`: its change points (a level that
moved and stayed), what is pending (the latest nights off the level, not yet persistent), and
whether the latest night is itself regressed. `Detection` is changepoints.json, the file
`gate history detect` writes and `gate history alert`, `gate baseline update --detection` and
the dashboard read.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gate.core.files import load_json_model, write_atomic
from gate.core.store import slug

DETECTION_SCHEMA_VERSION = 1
Direction = Literal["higher_is_better", "lower_is_better"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Point(Strict):
    """One night of one check: the run it came from and the figure (geometric mean of its
    repeats)."""

    run_id: int
    commit: str
    at: str = Field(description="what orders the nights: the commit's date, else the run's")
    value: float
    n: int
    sd_log: float | None = None
    pr: int | None = None


class Series(Strict):
    plan: str
    runner_class: str
    check: str
    label: str
    unit: str
    direction: Direction
    judged: bool
    points: list[Point]

    @property
    def key(self) -> str:
        """The series' identity in markers and file names: plan/runner class/check."""
        return f"{slug(self.plan)}/{slug(self.runner_class)}/{self.check}"

    def values(self) -> list[float]:
        return [p.value for p in self.points]


class Acknowledgement(Strict):
    """A maintainer's word that one check of one PR head is slower on purpose."""

    repository: str
    pr: int
    head_sha: str
    check: str
    reason: str
    login: str
    permission: str = Field(description="the login's permission on the repository, as GitHub said")
    created_at: str
    merged_commit: str | None = Field(None, description="the commit the PR became, once merged")


class ChangePoint(Strict):
    """The level of a series moved at `index` and stayed there."""

    index: int = Field(description="the first night at the new level")
    last_good: str = Field(description="commit of the last night at the old level")
    first_bad: str = Field(description="commit of the first night at the new level")
    before: float = Field(description="median of the segment before")
    after: float = Field(description="median of the segment after")
    change_pct: float = Field(description="after / before - 1, in percent")
    p_value: float = Field(description="two-sided t test of the two segments' logs")
    sigmas: float = Field(description="the change in units of the series' night-to-night noise")
    persistence: int = Field(description="nights after the change on the new level's side")
    nights_after: int = Field(description="nights in the segment after the change")
    regression: bool = Field(description="worse in the check's direction")
    recovered_at: str | None = Field(
        None, description="a regression: the commit where a later change brought the level back")
    acknowledged: Acknowledgement | None = None


class Pending(Strict):
    """The latest nights are off the current level but not yet for long enough to be a change."""

    nights: int
    first_off: str
    change_pct: float
    regression: bool


class SeriesDetection(Strict):
    plan: str
    runner_class: str
    check: str
    label: str
    unit: str
    direction: Direction
    nights: int
    sigma_pct: float | None = Field(None, description="night-to-night noise, percent (robust)")
    change_points: list[ChangePoint] = Field(default_factory=list)
    pending: Pending | None = None
    latest_regressed: bool = Field(
        False, description="the latest night is worse than the current level by more than the "
        "noise allows, or the current level is an unacknowledged regression")
    why: str = ""

    @property
    def key(self) -> str:
        return f"{slug(self.plan)}/{slug(self.runner_class)}/{self.check}"

    def open_regressions(self) -> list[ChangePoint]:
        """Regressions neither recovered nor acknowledged: what an alert is open for."""
        return [c for c in self.change_points
                if c.regression and c.recovered_at is None and c.acknowledged is None]


class DetectSettings(Strict):
    """How change points are found (docs/history.md, "Change points")."""

    penalty_factor: float = Field(2.0, gt=0, description="Pelt's penalty per change point, in "
                                  "units of log(nights), on the series scaled by its noise")
    alpha: float = Field(1e-4, gt=0, lt=1, description="largest p value of a change point")
    alpha_without: float = Field(1e-3, gt=0, lt=1, description="largest p value with the "
                                 "shorter segment's most extreme night left out")
    min_persistence: int = Field(3, ge=2, description="nights on the new level (and before it)")
    min_sigmas: float = Field(2.0, ge=0, description="smallest change, in units of the noise")
    min_change_pct: float = Field(2.0, ge=0, description="smallest change in percent, whatever "
                                  "the noise")
    spike_sigmas: float = Field(3.0, gt=0, description="the latest nights (pending) make the "
                                "series regressed when this many units of noise worse than its "
                                "level, once it has 2 x min_persistence nights")


class Detection(Strict):
    schema_version: int = DETECTION_SCHEMA_VERSION
    created_at: str = Field(default_factory=lambda: dt.datetime.now(dt.UTC)
                            .isoformat(timespec="seconds"))
    settings: DetectSettings = Field(default_factory=DetectSettings)
    series: list[SeriesDetection] = Field(default_factory=list)

    def for_run(self, plan: str, runner_class: str) -> list[SeriesDetection]:
        return [s for s in self.series if s.plan == plan and s.runner_class == runner_class]


def save_detection(detection: Detection, path: Path) -> Path:
    write_atomic(path, detection.model_dump_json(indent=1) + "\n")
    return path


def load_detection(path: Path) -> Detection:
    return load_json_model(Detection, path, "change-point file")
