"""profile-diff.json, the file `gate profile diff` writes: its models and how it is read and
written. The method behind the figures is in gate/profile/diff.py; this module needs only
pydantic, so the comment poster can validate a profile diff without numpy
(docs/security.md, "Hash-pinned installs in the token jobs")."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gate.core.files import load_json_model, write_atomic

PROFILE_DIFF_SCHEMA_VERSION = 1
PROFILE_DIFF_FILE = "profile-diff.json"
UNIT = "ms per 1k output tokens"


class DiffSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    basis: Literal["wall", "cpu"] = Field(
        "wall", description="what a sample weighs: wall = 1/rate (default); cpu = scaled by "
        "its process's CPU time over active time (gate.profile.data.SampleWindow.sample_ms)")
    confidence: float = Field(0.99, gt=0.5, lt=1.0)
    replicates: int = Field(2000, ge=200)
    min_share: float = Field(0.25, ge=0.0, le=1.0,
                             description="of the base build's total time, waits left out")
    min_rel: float = Field(0.5, ge=0.0, description="of the function's base figure")


class Change(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base: float = Field(description=UNIT)
    head: float = Field(description=UNIT)
    diff: float = Field(description="head - base")
    low: float | None = Field(None, description="interval of diff; None: below the floors")
    high: float | None = None
    significant: bool = False


class FunctionDiff(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str
    name: str
    line: int = 0
    self_time: Change
    inclusive: Change

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    @property
    def added(self) -> bool:
        """Significantly more time in the head, itself or below it."""
        return any(c.significant and c.diff > 0 for c in (self.self_time, self.inclusive))


class ProfileDiff(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = PROFILE_DIFF_SCHEMA_VERSION
    unit: str = UNIT
    base_label: str
    head_label: str
    base_source: str = ""
    head_source: str = ""
    base_windows: int
    head_windows: int
    base_tokens: float
    head_tokens: float
    total: Change = Field(description="all samples of all processes")
    waiting: Change = Field(description="samples in known spin-waits, left out of the functions")
    settings: DiffSettings
    method: str
    functions: list[FunctionDiff] = Field(
        default_factory=list, description="ranked: added self time, added inclusive time, "
        "removed time, then the largest differences below noise")
    artifacts: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    @property
    def named(self) -> list[FunctionDiff]:
        """The functions with a difference beyond noise, in rank order."""
        return [f for f in self.functions
                if f.self_time.significant or f.inclusive.significant]

    @property
    def added(self) -> list[FunctionDiff]:
        return [f for f in self.functions if f.added]


def save_profile_diff(diff: ProfileDiff, path: Path) -> Path:
    write_atomic(path, diff.model_dump_json(indent=1))
    return path


def load_profile_diff(path: str | Path) -> ProfileDiff:
    p = Path(path)
    return load_json_model(ProfileDiff, p / PROFILE_DIFF_FILE if p.is_dir() else p,
                           "profile diff file")
