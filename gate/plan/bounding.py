"""Real schemas made fit for a random-weight model: every output must end inside max_tokens.

The tiny CPU model has random weights; guided decoding forces its output to follow the schema,
but nothing makes it close an unbounded string, array or number. `bound` therefore adds
constraints, never removes one: a node without a type gets the one its keywords imply (a short
string when none does), strings a short maxLength (also beside a pattern or a format that is
not short by nature: a backend that cannot combine them refuses the schema, and says so),
arrays a maxItems, numbers a range, objects keep their required properties and their first few
optional ones and allow no others. An output valid against the bounded schema
is valid against the original (docs/corpus.md says where that reasoning stops: patternProperties
are dropped with the properties they could constrain). Nesting, $refs, anyOf/oneOf/allOf,
enums and patterns stay as they are: they are what makes compiling hard.

Pure functions on JSON documents; local `#/...` references only (others are refused earlier).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

STRING_MAX = 8
ARRAY_MAX = 2
OPTIONAL_KEPT = 2
NUMBER_SPAN = 999
MAX_DEPTH = 24
# Keywords whose value is one subschema, a list of them, or a name -> subschema mapping.
ONE = ("items", "additionalItems", "not", "if", "then", "else", "contains", "propertyNames",
       "additionalProperties")
MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
NAMED = ("properties", "definitions", "$defs", "patternProperties", "dependencies",
         "dependentSchemas")


def subschemas(node: Any) -> Iterator[dict[str, Any]]:
    """The direct subschemas of a schema node (a list-valued `items` counts as MANY)."""
    if not isinstance(node, dict):
        return
    for key in ONE:
        value = node.get(key)
        if isinstance(value, dict):
            yield value
        elif key == "items" and isinstance(value, list):
            yield from (v for v in value if isinstance(v, dict))
    for key in MANY:
        for value in node.get(key) or []:
            if isinstance(value, dict):
                yield value
    for key in NAMED:
        for value in (node.get(key) or {}).values():
            if isinstance(value, dict):
                yield value


def walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for sub in subschemas(node):
            yield from walk(sub)


def refs(schema: Any) -> set[str]:
    return {n["$ref"] for n in walk(schema) if isinstance(n.get("$ref"), str)}


def resolve(root: dict[str, Any], ref: str) -> Any:
    """The node a local `#/a/b` reference points to (None when it points nowhere)."""
    node: Any = root
    for part in ref.removeprefix("#").strip("/").split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        node = node.get(part) if isinstance(node, dict) else None
    return node


def problem(schema: Any) -> str | None:
    """Why this document cannot be a corpus schema (None: it can be bounded)."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict) \
            or not schema["properties"]:
        return "its root is not an object schema with properties"
    outside = sorted(r for r in refs(schema) if not r.startswith("#"))
    if outside:
        return f"$ref outside the document ({outside[0]})"
    missing = sorted(r for r in refs(schema) if resolve(schema, r) is None)
    if missing:
        return f"$ref to nothing ({missing[0]})"
    if recursive(schema):
        return "recursive $ref: its outputs have no length bound"
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        return f"not a valid JSON schema: {exc.message[:120]}"
    return None


def recursive(schema: dict[str, Any]) -> bool:
    """True when a reference leads back to a node it came from (a cycle of $refs)."""
    def visit(ref: str, path: tuple[str, ...]) -> bool:
        if ref in path:
            return True
        target = resolve(schema, ref)
        return any(visit(r, (*path, ref)) for r in sorted(refs(target)) if r.startswith("#"))

    return any(visit(r, ()) for r in sorted(refs({k: v for k, v in schema.items()
                                                  if k not in ("definitions", "$defs")})))


def _types(node: dict[str, Any]) -> set[str]:
    value = node.get("type")
    return set(value) if isinstance(value, list) else {value} if isinstance(value, str) else set()


# Formats whose every value is short: no maxLength needed (a backend may refuse the mix).
SHORT_FORMATS = ("date", "time", "date-time", "uuid", "ipv4", "ipv6", "duration")
# Keywords that give a node its type elsewhere (left as they are).
TYPED_ELSEWHERE = ("$ref", "enum", "const", "anyOf", "oneOf", "allOf", "not", "if")
IMPLIED = (("object", ("properties", "additionalProperties", "required", "patternProperties")),
           ("array", ("items", "prefixItems", "minItems", "maxItems")),
           ("string", ("maxLength", "minLength", "pattern", "format")),
           ("number", ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                       "multipleOf")))


def _bound_untyped(node: dict[str, Any]) -> None:
    """A node without `type` accepts a value of any type (a number with no end, too): give it
    the type its keywords imply, and a short string when nothing does."""
    if "type" in node or any(k in node for k in TYPED_ELSEWHERE):
        return
    node["type"] = next((kind for kind, keys in IMPLIED if any(k in node for k in keys)),
                        "string")


def _bound_string(node: dict[str, Any]) -> None:
    if any(k in node for k in ("enum", "const")) or node.get("format") in SHORT_FORMATS:
        return
    low = int(node.get("minLength", 0))
    node["maxLength"] = max(low, min(int(node.get("maxLength", STRING_MAX)), STRING_MAX))


def _bound_array(node: dict[str, Any]) -> None:
    low = int(node.get("minItems", 0))
    node["maxItems"] = max(low, min(int(node.get("maxItems", ARRAY_MAX)), ARRAY_MAX))


def _bound_number(node: dict[str, Any]) -> None:
    has_low = "minimum" in node or isinstance(node.get("exclusiveMinimum"), (int, float))
    has_high = "maximum" in node or isinstance(node.get("exclusiveMaximum"), (int, float))
    if not has_low:
        high = node.get("maximum", node.get("exclusiveMaximum", NUMBER_SPAN))
        node["minimum"] = 0 if high > 0 else high - NUMBER_SPAN
    if not has_high:
        node["maximum"] = node.get("minimum", node.get("exclusiveMinimum", 0)) + NUMBER_SPAN


def _bound_object(node: dict[str, Any]) -> None:
    props = node.get("properties")
    if not isinstance(props, dict):
        # an open map (additionalProperties: a schema) has no bound on its keys: none allowed
        if "object" in _types(node) or "additionalProperties" in node:
            node.pop("patternProperties", None)
            node["additionalProperties"] = False
        return
    required = [r for r in node.get("required", []) if r in props]
    optional = [p for p in props if p not in required][:OPTIONAL_KEPT]
    node["properties"] = {k: v for k, v in props.items() if k in required or k in optional}
    node.pop("patternProperties", None)
    node["additionalProperties"] = False


def bound(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` whose every output is bounded (see the module doc)."""
    out = copy.deepcopy(schema)
    for node in list(walk(out)):
        _bound_untyped(node)
        types = _types(node)
        if "string" in types:
            _bound_string(node)
        if "array" in types or "items" in node:
            _bound_array(node)
        if types & {"integer", "number"}:
            _bound_number(node)
        _bound_object(node)
    return out


# ---------------------------------------------------------------- smallest valid output


class NoInstance(Exception):
    """No smallest valid output could be built for a schema."""


def minimal(root: dict[str, Any], node: Any = None, depth: int = 0) -> Any:
    """A small value for `node` (default: the root) that the schema should accept; the caller
    validates it, since allOf/if/not are only approximated."""
    node = root if node is None else node
    if depth > MAX_DEPTH:
        raise NoInstance("nesting deeper than the search goes")
    if node is True or node == {}:
        return None
    if not isinstance(node, dict):
        raise NoInstance("a false schema accepts nothing")
    if "$ref" in node:
        return minimal(root, resolve(root, node["$ref"]), depth + 1)
    if "const" in node:
        return node["const"]
    if node.get("enum"):
        return min(node["enum"], key=lambda v: len(json.dumps(v)))
    for key in ("anyOf", "oneOf"):
        if node.get(key):
            return minimal(root, node[key][0], depth + 1)
    if node.get("allOf"):
        merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
        for part in node["allOf"]:
            part = resolve(root, part["$ref"]) if isinstance(part, dict) and "$ref" in part \
                else part
            for k, v in (part or {}).items():
                merged[k] = {**merged.get(k, {}), **v} if k == "properties" else \
                    [*merged.get(k, []), *v] if k == "required" else v
        return minimal(root, merged, depth + 1)
    return _minimal_typed(root, node, depth)


def _minimal_typed(root: dict[str, Any], node: dict[str, Any], depth: int) -> Any:
    types = _types(node) or ({"object"} if "properties" in node else {"string"})
    for kind in ("null", "boolean", "integer", "number", "string", "object", "array"):
        if kind not in types:
            continue
        if kind == "null":
            return None
        if kind == "boolean":
            return False
        if kind in ("integer", "number"):
            low = node.get("minimum", node.get("exclusiveMinimum", 0))
            return int(low) + (1 if "exclusiveMinimum" in node and "minimum" not in node else 0)
        if kind == "string":
            if "pattern" in node:
                raise NoInstance("a pattern (no smallest string is built for one)")
            return "a" * int(node.get("minLength", 0))
        if kind == "object":
            props = node.get("properties", {})
            return {k: minimal(root, props.get(k, {}), depth + 1) for k in node.get("required", [])}
        return [minimal(root, _item(node), depth + 1) for _ in range(int(node.get("minItems", 0)))]
    raise NoInstance(f"type {sorted(types)} is not one the search knows")


def _item(node: dict[str, Any]) -> Any:
    items = node.get("items", {})
    return items[0] if isinstance(items, list) and items else items


def smallest_output(schema: dict[str, Any]) -> str:
    """The compact JSON text of a small valid output; NoInstance when none is found."""
    value = minimal(schema)
    error = next(iter(validator_for(schema, default=Draft202012Validator)(schema)
                      .iter_errors(value)), None)
    if error is not None:
        raise NoInstance(f"the smallest candidate is invalid: {error.message[:120]}")
    return json.dumps(value, separators=(",", ":"))


def longest_output_bytes(root: dict[str, Any]) -> int:
    """An upper bound on the compact JSON size of any output of a bounded schema (strings
    counted at 2 bytes a character for escapes; anyOf at its longest branch)."""
    def size(node: Any, depth: int) -> int:
        if depth > MAX_DEPTH or not isinstance(node, dict):
            return 8
        if "$ref" in node:
            return size(resolve(root, node["$ref"]), depth + 1)
        if "const" in node or node.get("enum"):
            values = [node["const"]] if "const" in node else node["enum"]
            return max(len(json.dumps(v)) for v in values)
        branches = [*node.get("anyOf", []), *node.get("oneOf", [])]
        if branches:
            return max(size(b, depth + 1) for b in branches)
        parts = [size(p, depth + 1) for p in node.get("allOf", [])]
        return max([*parts, _typed_size(node, depth, size)])

    return size(root, 0)


def _typed_size(node: dict[str, Any], depth: int, size) -> int:
    types = _types(node) or {"object"}
    best = 5  # null, true, false
    if "string" in types:
        best = max(best, 2 + 2 * int(node.get("maxLength", 64)))
    if types & {"integer", "number"}:
        best = max(best, 24)
    if "array" in types or "items" in node:
        best = max(best, 2 + int(node.get("maxItems", ARRAY_MAX)) * (1 + size(_item(node), depth + 1)))
    if "object" in types or "properties" in node:
        props = node.get("properties", {})
        best = max(best, 2 + sum(len(json.dumps(k)) + 2 + size(v, depth + 1)
                                 for k, v in props.items()))
    return best
