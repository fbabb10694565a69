"""Folders of versioned YAML records: the stored baselines and noise calibrations.

One record per file, `{kind}` named in every error; each file carries `schema_version`, and a
file of another version is refused with the version this gate reads, never half-read. Writing
goes through a temporary file and checks that what is written loads back, so a failed run
never leaves a broken or half-written record in place of a good one.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ConfigDict

from gate.core.errors import GateError
from gate.core.files import load_yaml_model, write_atomic

Record = TypeVar("Record", bound=BaseModel)


class StrictModel(BaseModel):
    """A stored record's model: unknown keys are errors, not silently dropped data."""

    model_config = ConfigDict(extra="forbid")


def today() -> str:
    """The UTC date a record was made, as stored in its provenance."""
    return dt.datetime.now(dt.UTC).date().isoformat()


def slug(text: str) -> str:
    """A file-name-safe form of a plan name or hardware key: lowercase, runs of anything but
    letters and digits as one dash."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def load_record(model: type[Record], path: str | Path, kind: str, version: int) -> Record:
    """One stored record; a missing, broken or other-version file is a GateError naming it."""
    path = Path(path)
    record = load_yaml_model(model, path, kind)
    found = getattr(record, "schema_version", None)
    if found != version:
        raise GateError(f"{kind} {path} has schema v{found}; this gate reads v{version}")
    return record


def record_files(directory: str | Path) -> list[Path]:
    """The YAML files of a store folder, sorted; none when the folder does not exist."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(list(directory.glob("*.yaml")) + list(directory.glob("*.yml")))


def load_records(model: type[Record], directory: str | Path, kind: str, version: int
                 ) -> list[tuple[Path, Record]]:
    """Every record of a store folder; one broken file stops the lot (never skipped silently)."""
    return [(p, load_record(model, p, kind, version)) for p in record_files(directory)]


def dump_record(record: BaseModel) -> str:
    data = record.model_dump(mode="json", exclude_none=True)
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)


def write_record(path: Path, record: Record) -> Path:
    """Write `record` atomically, after checking that the text loads back as the same model."""
    text = dump_record(record)
    type(record).model_validate(yaml.safe_load(text))
    write_atomic(path, text)
    return path
