"""A team's own guided workload (docs/upgrade.md#your-own-workload): a folder of JSON schemas
(`workload.schema_dir`), or a JSONL file of recorded requests (`workload.recorded_requests`).

- A schema folder: every `*.json` file in it (sorted by name) is one schema; guided requests
  cycle through them, each asking for a document of its schema (its title and description)
  and validated against its own schema.
- Recorded requests: one OpenAI chat body a line, as a team's traffic logs them: `messages`
  (or a plain `prompt`), `max_tokens` (or `max_completion_tokens`), and the schema under
  `response_format.json_schema.schema`, `structured_outputs.json`, vLLM's older
  `guided_json`, or plain `schema`. Replayed in order and cycled, each with its own messages,
  schema and max_tokens (the plan's `max_tokens` only where a line has none), sent the way
  the plan's `schema_transport` says; the rest of a line (temperature, tools) is not replayed.

A file that cannot be used is an error naming the file (and the line), never a skipped entry.
What is read is part of the plan's hash (`digest`), so two plans that send different schemas
never compare.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from gate.core.errors import GateError

MAX_ENTRIES = 100_000


@dataclass(frozen=True)
class OwnEntry:
    """One guided request of the team's workload."""

    name: str  # the schema file's name, or `FILE:LINE`
    schema: dict[str, Any]
    prompt: str = ""
    messages: tuple[dict[str, Any], ...] = ()  # recorded requests: sent as they were
    max_tokens: int | None = None  # recorded requests: their own
    title: str = field(default="", compare=False)
    description: str = field(default="", compare=False)


def check_schema(schema: Any, where: str) -> dict[str, Any]:
    # imported here: gate.plan.spec imports this module, and the token jobs load plans with
    # no jsonschema installed (requirements/poster.in)
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, dict):
        raise GateError(f"{where}: a JSON schema must be an object, not {type(schema).__name__}")
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        raise GateError(f"{where}: not a valid JSON schema: {exc.message}") from None
    return schema


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise GateError(f"cannot read {what} {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise GateError(f"{what} {path} is not JSON: {exc.msg} (line {exc.lineno})") from None


def schema_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise GateError(f"workload.schema_dir {folder} is not a folder")
    files = sorted(p for p in folder.glob("*.json") if p.is_file())
    if not files:
        raise GateError(f"workload.schema_dir {folder} holds no *.json schema file")
    return files


def load_schema_dir(folder: str | Path) -> tuple[OwnEntry, ...]:
    """Every schema of the folder, as guided requests."""
    files = schema_files(Path(folder))
    return _load_schema_dir(str(Path(folder).resolve()), _stamp(files))


@lru_cache(maxsize=8)
def _load_schema_dir(folder: str, stamp: tuple) -> tuple[OwnEntry, ...]:
    """Read once per version of the folder's files (the plan hash asks after every round)."""
    out = []
    for path in schema_files(Path(folder)):
        schema = check_schema(_read_json(path, "schema file"), f"schema file {path}")
        out.append(OwnEntry(
            name=path.name, schema=schema,
            title=str(schema.get("title") or path.stem),
            description=str(schema.get("description") or "")))
    return tuple(out)


def _stamp(files: list[Path]) -> tuple:
    return tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in files)


def load_recorded(path: str | Path) -> tuple[OwnEntry, ...]:
    """Every recorded request of the JSONL file, in order."""
    file = Path(path)
    if not file.is_file():
        raise GateError(f"workload.recorded_requests {file} is not a file")
    return _load_recorded(str(file.resolve()), _stamp([file]))


@lru_cache(maxsize=8)
def _load_recorded(path: str, stamp: tuple) -> tuple[OwnEntry, ...]:
    out = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise GateError(f"cannot read recorded requests {path}: {exc}") from None
    for number, line in enumerate(lines, 1):
        if line.strip():
            out.append(recorded_entry(line, f"{Path(path).name}:{number}"))
        if len(out) > MAX_ENTRIES:
            raise GateError(f"recorded requests {path}: more than {MAX_ENTRIES} lines")
    if not out:
        raise GateError(f"recorded requests {path} holds no request")
    return tuple(out)


def recorded_entry(line: str, where: str) -> OwnEntry:
    """One recorded chat request (see the module docstring)."""
    try:
        body = json.loads(line)
    except json.JSONDecodeError as exc:
        raise GateError(f"recorded request {where} is not JSON: {exc.msg}") from None
    if not isinstance(body, dict):
        raise GateError(f"recorded request {where} is not a JSON object")
    schema = _recorded_schema(body)
    if schema is None:
        raise GateError(f"recorded request {where} carries no schema (response_format "
                        "json_schema, structured_outputs.json, guided_json or schema)")
    messages = body.get("messages")
    prompt = body.get("prompt")
    if messages is None and not isinstance(prompt, str):
        raise GateError(f"recorded request {where} has neither messages nor a prompt")
    if messages is not None and not (isinstance(messages, list) and messages
                                     and all(isinstance(m, dict) for m in messages)):
        raise GateError(f"recorded request {where}: messages must be a list of objects")
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise GateError(f"recorded request {where}: max_tokens must be a positive integer")
    return OwnEntry(name=where, schema=check_schema(schema, f"recorded request {where}"),
                    prompt=prompt if isinstance(prompt, str) else "",
                    messages=tuple(messages or ()), max_tokens=max_tokens)


def _recorded_schema(body: dict[str, Any]) -> Any:
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and isinstance(fmt.get("json_schema"), dict):
        return fmt["json_schema"].get("schema")
    outputs = body.get("structured_outputs")
    if isinstance(outputs, dict) and "json" in outputs:
        return outputs["json"]
    return body.get("guided_json", body.get("schema"))


def digest(entries: tuple[OwnEntry, ...]) -> str:
    """The identity of what is sent: part of the plan's measurement hash."""
    blob = json.dumps([[e.schema, list(e.messages), e.prompt, e.max_tokens] for e in entries],
                      sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
