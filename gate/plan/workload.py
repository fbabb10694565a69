"""What the load client sends: prompts, JSON schemas and request bodies, and how a guided
output is judged (parses and validates against the schema it was sent with)."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from gate.core.errors import GateError
from gate.plan.spec import WorkloadSpec

# Bounded everywhere (string lengths, integer ranges, enums, array sizes) so that every output
# terminates well inside max_tokens even from a random-weight model.
PERSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"type": "string", "enum": ["Paris", "Lima", "Oslo", "Kyoto", "Accra"]},
        "tags": {
            "type": "array",
            "items": {"type": "string", "enum": ["a", "b", "c"]},
            "maxItems": 3,
        },
    },
    "required": ["name", "age", "city", "tags"],
    "additionalProperties": False,
}


def base_schema(spec: WorkloadSpec) -> dict[str, Any]:
    schema = spec.json_schema if spec.json_schema is not None else PERSON_SCHEMA
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise GateError(f"workload.json_schema is not a valid JSON schema: {exc.message}") from None
    return schema


def schema_for(spec: WorkloadSpec, index: int) -> dict[str, Any]:
    """The schema of request `index`: shared, or a unique variant that defeats the grammar
    cache (one extra required integer property whose name carries the index)."""
    schema = base_schema(spec)
    if spec.schema_variants == "shared":
        return schema
    variant = copy.deepcopy(schema)
    key = f"v{index}"
    variant.setdefault("properties", {})[key] = {"type": "integer", "minimum": 0, "maximum": 9}
    variant["required"] = [*variant.get("required", []), key]
    return variant


def prompts(spec: WorkloadSpec) -> list[str]:
    rng = random.Random(spec.seed)
    order = list(range(spec.prompt_count))
    rng.shuffle(order)
    return [spec.prompt_template.format(i=i) for i in order]


def request_body(
    spec: WorkloadSpec, model: str, prompt: str, guided: bool, schema: dict[str, Any] | None,
    free_max_tokens: int | None = None,
) -> dict[str, Any]:
    """One streaming chat request; `free_max_tokens` caps free requests (None: max_tokens)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": spec.max_tokens if guided else (free_max_tokens or spec.max_tokens),
        "temperature": spec.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if guided:
        if spec.schema_transport == "response_format":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "gate_output", "schema": schema},
            }
        else:
            body["structured_outputs"] = {"json": schema}
    elif spec.free_ignore_eos:
        body["ignore_eos"] = True
    return body


def validate_output(text: str, schema: dict[str, Any]) -> str | None:
    """None when `text` is JSON that follows `schema`; otherwise why not (short)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"not JSON: {exc.msg} at char {exc.pos}"
    error = next(iter(Draft202012Validator(schema).iter_errors(value)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        return f"schema violation at {where}: {error.message[:200]}"
    return None
