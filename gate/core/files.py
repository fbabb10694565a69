"""The gate's files: written atomically, read into typed models with errors that name the file,
the key and the problem.

Every stage meets the next through a file (results.json, verdict.json, hunks.json, a plan or a
baseline YAML). A broken file is the user's to fix, so reading one never shows a traceback:
it raises a `GateError` that says which file, which key, and what is wrong with it.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from gate.core.errors import GateError

M = TypeVar("M", bound=BaseModel)


class OtherSchemaVersion(GateError):
    """A file of the right kind written by a gate of another schema version: refused as
    such; a cache may take it as a miss, a stored file is the user's to migrate."""
MAX_PROBLEMS_SHOWN = 8
PLAIN_KEY = re.compile(r"[A-Za-z0-9_.+-]{1,80}")


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file in the same folder, so a crash never leaves half a file
    and a failed run never clobbers what was stored before."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def validation_problems(exc: ValidationError) -> list[str]:
    """One line per problem, `key.path: message`, unknown keys called what they are."""
    lines = []
    for err in exc.errors()[:MAX_PROBLEMS_SHOWN]:
        where = ".".join(_key(p) for p in err["loc"]) or "(top level)"
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(f"{where}: {msg}")
    if exc.error_count() > MAX_PROBLEMS_SHOWN:
        lines.append(f"... and {exc.error_count() - MAX_PROBLEMS_SHOWN} more")
    return lines


def _key(part: object) -> str:
    """A key of the file as the message shows it: a plain name as it is, anything else (a key
    the file's author chose, with spaces, line breaks or `::`) quoted and ASCII-escaped."""
    text = str(part)
    return text if PLAIN_KEY.fullmatch(text) else ascii(text)


def invalid(what: str, exc: ValidationError) -> GateError:
    """The GateError for a validation failure: `invalid <what>:` then one indented line per
    problem."""
    return GateError("\n  ".join([f"invalid {what}:", *validation_problems(exc)]))


def validate(model: type[M], data: Any, what: str) -> M:
    """`model.model_validate(data)`, failing with a GateError that names `what` and each key."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid(what, exc) from None


def read_text(path: Path, what: str) -> str:
    path = Path(path)
    if not path.is_file():
        raise GateError(f"{what} {path} does not exist")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise GateError(f"cannot read {what} {path}: {reason}") from None


def load_json_model(model: type[M], path: Path, what: str) -> M:
    """Read the JSON file at `path` into `model`. A missing, unreadable or malformed file is
    a GateError that names the file, what it should have been, and the problems; a file of
    another `schema_version` than the model's is refused as such, before its keys are judged
    (a newer gate's file would otherwise read as a list of unknown keys). Every JSON kind of
    file the gate reads comes through here (ARCHITECTURE.md, "The files between stages")."""
    text = read_text(path, what)
    try:
        record = model.model_validate_json(text)
    except ValidationError as exc:
        _refuse_other_version(model, _peek_version(text), path, what)
        raise invalid(f"{what} {path}", exc) from None
    _refuse_other_version(model, getattr(record, "schema_version", None), path, what)
    return record


def schema_version_of(model: type[BaseModel]) -> int | None:
    """The version a model's files carry (its schema_version field's default), if any."""
    field = model.model_fields.get("schema_version")
    return field.default if field is not None and isinstance(field.default, int) else None


def _peek_version(text: str) -> object:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data.get("schema_version") if isinstance(data, dict) else None


def _refuse_other_version(model: type[BaseModel], found: object, path: Path, what: str) -> None:
    expected = schema_version_of(model)
    if expected is not None and found is not None and found != expected:
        raise OtherSchemaVersion(f"{what} {path} has schema v{found}; this gate reads "
                                 f"v{expected}")


def load_yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    """A YAML file whose top level must be a mapping (plans, baselines, noise profiles)."""
    text = read_text(path, what)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise GateError(f"{what} {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise GateError(f"invalid {what} {path}: expected a mapping at the top level")
    return data


def load_yaml_model(model: type[M], path: Path, what: str) -> M:
    return validate(model, load_yaml_mapping(path, what), f"{what} {path}")
