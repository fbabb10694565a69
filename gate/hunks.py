"""The PR's diff hunks in the watched structured-output hot paths (hunks.json)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

HUNKS_SCHEMA_VERSION = 1


class Hunk(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="path in the head tree (the old path for a deletion)")
    old_path: str | None = Field(None, description="set when the file was renamed")
    change: str = Field("modified", description="modified, added, deleted, renamed, binary")
    old_start: int = 0
    old_lines: int = 0
    new_start: int = 0
    new_lines: int = 0
    section: str = Field("", description="the function/class header git prints after @@")
    text: str = Field("", description="the hunk body, untrusted: escape before rendering")
    mechanisms: list[str] = Field(
        default_factory=list, description="known-regression mechanisms it touches, e.g. pin_memory"
    )
    score: float = Field(0.0, description="rank: higher first")


class HunkSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = HUNKS_SCHEMA_VERSION
    repo: str
    base: str
    head: str
    merge_base: str
    watch: list[str]
    hunks: list[Hunk] = Field(default_factory=list, description="ranked, most suspicious first")
    files_changed: int = 0
    files_watched: int = 0
