"""What the load client sends: prompts, JSON schemas and request bodies, and how a guided
output is judged (parses and validates against the schema it was sent with).

Guided requests carry the plan's schema (json_schema, or the built-in person schema) or, with
`workload.corpus`, schemas drawn from a corpus of real ones, each with a prompt that asks for
it. The `unique` arm sends every request a variant no earlier request carried (the grammar
cache misses: docs/compare.md#time-to-first-token-and-grammar-compilation)."""

from __future__ import annotations

import copy
import functools
import json
import random
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from gate.core.errors import GateError
from gate.plan.corpus import CorpusSchema, draw, load_corpus
from gate.plan.own_workload import OwnEntry
from gate.plan.schemas import PERSON_SCHEMA
from gate.plan.spec import WorkloadSpec, resolve_schema

__all__ = ["PERSON_SCHEMA", "base_schema", "output_length_bounds", "prompts", "request_body",
           "schema_for", "validate_output"]

def base_schema(spec: WorkloadSpec) -> dict[str, Any]:
    schema = resolve_schema(spec.json_schema)
    _check_schema(json.dumps(schema, sort_keys=True))
    return schema


@functools.lru_cache(maxsize=64)
def _check_schema(text: str) -> None:
    """Checked once per schema (a failure is not cached): a check costs milliseconds, and the
    client builds every guided request's body on its event loop, while streams are in flight."""
    try:
        Draft202012Validator.check_schema(json.loads(text))
    except SchemaError as exc:
        raise GateError(f"workload.json_schema is not a valid JSON schema: {exc.message}") from None


def unique_variant(schema: dict[str, Any], index: int) -> dict[str, Any]:
    """A variant of an object schema no other index gets: one more required boolean property
    whose name carries the index, so the grammar itself differs (a cache keyed by the
    compiled grammar misses too, not only one keyed by the schema's text). Boolean: every
    backend enforces it (outlines ignores integer bounds, so a bounded integer would let its
    outputs run long and fail validation)."""
    variant = copy.deepcopy(schema)
    key = f"v{index}"
    variant.setdefault("properties", {})[key] = {"type": "boolean"}
    variant["required"] = [*variant.get("required", []), key]
    return variant


def schema_for(spec: WorkloadSpec, index: int, arm: str = "guided") -> dict[str, Any]:
    """The plan's own schema for request `index` of `arm`: shared, or a unique variant (the
    `unique` arm always; the guided arm with schema_variants: unique)."""
    schema = base_schema(spec)
    if arm == "unique" or spec.schema_variants == "unique":
        return unique_variant(schema, index)
    return schema


def prompts(spec: WorkloadSpec) -> list[str]:
    rng = random.Random(spec.seed)
    order = list(range(spec.prompt_count))
    rng.shuffle(order)
    return [spec.prompt_template.format(i=i) for i in order]


def schema_prompt(name: str, title: str, description: str) -> str:
    """Ask for a document of the schema's kind (its title and description, ASCII only: the
    tiny model's tokenizer has no other characters)."""
    about = " ".join(f"{title}. {description}".split())
    about = about.encode("ascii", "ignore").decode()[:200]
    return f"Fill in a JSON document for this schema ({name}): {about}"


def corpus_prompt(entry: CorpusSchema) -> str:
    return schema_prompt(entry.id, entry.title, entry.description)


@dataclass(frozen=True)
class GuidedLoad:
    """What request `index` of an arm carries: its prompt (or recorded messages), its
    max_tokens and (guided arms) its schema."""

    spec: WorkloadSpec
    drawn: tuple[CorpusSchema, ...] = ()  # corpus schemas; empty: the plan's own schema
    prompt_list: tuple[str, ...] = ()
    own: tuple[OwnEntry, ...] = ()  # a schema folder's or recorded requests (own_workload)

    @classmethod
    def for_backend(cls, spec: WorkloadSpec, backend: str) -> GuidedLoad:
        drawn = tuple(draw(load_corpus(spec.corpus.file), spec.corpus, backend)) \
            if spec.corpus is not None else ()
        return cls(spec, drawn, tuple(prompts(spec)), spec.own_entries())

    @property
    def distinct_schemas(self) -> int:
        """How many schemas of a corpus, folder or recording the guided arm cycles through
        (0: the plan's one schema)."""
        return len(self.drawn) or len({json.dumps(e.schema, sort_keys=True) for e in self.own})

    def prompt(self, index: int) -> str:
        if self.own:
            entry = self.own[index % len(self.own)]
            return entry.prompt or schema_prompt(entry.name, entry.title, entry.description)
        if self.drawn:
            return corpus_prompt(self.drawn[index % len(self.drawn)])
        return self.prompt_list[index % len(self.prompt_list)]

    def schema(self, index: int, arm: str) -> dict[str, Any] | None:
        if arm == "free":
            return None
        if not self.drawn and not self.own:
            return schema_for(self.spec, index, arm)
        schema = self.own[index % len(self.own)].schema if self.own else \
            self.drawn[index % len(self.drawn)].json_schema
        unique = arm == "unique" or self.spec.schema_variants == "unique"
        return unique_variant(schema, index) if unique else schema

    def request(self, index: int, arm: str, model: str,
                free_max_tokens: int | None = None) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Request `index` of `arm`: its body and the schema its output must follow (None:
        free). A recorded request keeps its messages and its own max_tokens."""
        schema = self.schema(index, arm)
        entry = self.own[index % len(self.own)] if self.own else None
        body = request_body(self.spec, model, prompt=self.prompt(index),
                            guided=schema is not None, schema=schema,
                            free_max_tokens=free_max_tokens)
        if entry is not None and entry.messages:
            body["messages"] = [dict(m) for m in entry.messages]
        if entry is not None and entry.max_tokens and schema is not None:
            body["max_tokens"] = entry.max_tokens
        return body, schema


def request_body(
    spec: WorkloadSpec, model: str, *, prompt: str, guided: bool, schema: dict[str, Any] | None,
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
    # the schema's own draft ($schema), 2020-12 when it names none
    validator = validator_for(schema, default=Draft202012Validator)(schema)
    error = next(iter(validator.iter_errors(value)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        return f"schema violation at {where}: {error.message[:200]}"
    return None


# ---- how long a guided output can be ---------------------------------------------------------

def _digits(lo: int, hi: int) -> tuple[int, int]:
    """Shortest and longest decimal spelling of an integer in [lo, hi]."""
    def width(n: int) -> int:
        return len(str(n))
    shortest = 1 if lo <= 0 <= hi else min(width(lo), width(hi))
    return shortest, max(width(lo), width(hi))


def _add(a: tuple[int, int | None], b: tuple[int, int | None]) -> tuple[int, int | None]:
    return a[0] + b[0], None if a[1] is None or b[1] is None else a[1] + b[1]


def output_length_bounds(schema: dict[str, Any]) -> tuple[int, int | None]:
    """(shortest, longest) compact JSON text, in characters, that `schema` admits: what the
    grammar forces whatever model fills it (xgrammar without free whitespace writes ", " and
    ": " between items, as json.dumps does). None: unbounded. Covers the bounded subset the
    gate's schemas use: objects whose properties are all required, arrays with minItems and
    maxItems, strings with minLength/maxLength (characters that need no escape), integers with
    both bounds, enums and booleans; anything else is a GateError."""
    if "enum" in schema:
        spelled = [len(json.dumps(v)) for v in schema["enum"]]
        return min(spelled), max(spelled)
    kind = schema.get("type")
    if kind == "object":
        return _object_bounds(schema)
    if kind == "array":
        return _array_bounds(schema)
    if kind == "string":
        hi = schema.get("maxLength")
        return 2 + schema.get("minLength", 0), None if hi is None else 2 + hi
    if kind == "integer" and "minimum" in schema and "maximum" in schema:
        return _digits(int(schema["minimum"]), int(schema["maximum"]))
    if kind == "boolean":
        return 4, 5
    raise GateError(f"output_length_bounds: no bound for the schema part {json.dumps(schema)[:80]}")


def _object_bounds(schema: dict[str, Any]) -> tuple[int, int | None]:
    props = schema.get("properties", {})
    if set(schema.get("required", [])) != set(props) or schema.get("additionalProperties", True):
        raise GateError("output_length_bounds: objects must require every property and allow "
                        "no others")
    frame = 2 + 2 * max(len(props) - 1, 0)  # the braces and the ", " between properties
    total: tuple[int, int | None] = (frame, frame)
    for name, sub in props.items():
        key = len(json.dumps(name)) + 2  # "name" and ": "
        total = _add(total, _add((key, key), output_length_bounds(sub)))
    return total


def _array_bounds(schema: dict[str, Any]) -> tuple[int, int | None]:
    lo_n, hi_n = schema.get("minItems", 0), schema.get("maxItems")
    item = output_length_bounds(schema.get("items", {}))
    lo = 2 + lo_n * item[0] + 2 * max(lo_n - 1, 0)
    if hi_n is None or item[1] is None:
        return lo, None
    return lo, 2 + hi_n * item[1] + 2 * max(hi_n - 1, 0)
