"""The schema corpus: bounding real schemas for a random-weight model, screening them, and the
seeded, compile-cost-stratified draw a plan takes (recorded in the plan hash)."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft7Validator

from gate.core.errors import GateError
from gate.plan import bounding
from gate.plan.corpus import (
    CorpusFile,
    CorpusProvenance,
    CorpusSchema,
    CorpusSpec,
    draw,
    left_out,
    strata,
)
from gate.plan.spec import load_plan, parse_plan
from gate.plan.workload import GuidedLoad

REAL = {  # the shape of a SchemaStore schema: draft-07, definitions, refs, open objects
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "definitions": {"port": {"type": "integer"}, "name": {"type": "string"}},
    "properties": {
        "name": {"$ref": "#/definitions/name"},
        "ports": {"type": "array", "items": {"$ref": "#/definitions/port"}},
        "mode": {"enum": ["fast", "safe"]},
        "tags": {"type": "object", "additionalProperties": {"type": "string"}},
        "extra": {"type": "boolean"},
    },
    "required": ["name", "ports"],
}


def test_bound_adds_constraints_and_keeps_structure():
    b = bounding.bound(REAL)
    assert b["definitions"]["name"]["maxLength"] == bounding.STRING_MAX
    assert b["definitions"]["port"] == {"type": "integer", "minimum": 0, "maximum": 999}
    assert b["properties"]["ports"]["maxItems"] == bounding.ARRAY_MAX
    assert b["additionalProperties"] is False
    # required first, then the first optional ones
    assert list(b["properties"]) == ["name", "ports", "mode", "tags"]
    assert b["properties"]["tags"]["additionalProperties"] is False
    assert REAL["properties"]["tags"]["additionalProperties"] == {"type": "string"}  # a copy


def test_every_output_of_the_bounded_schema_is_valid_for_the_original():
    b = bounding.bound(REAL)
    for output in ({"name": "ab", "ports": [1, 2]}, {"name": "", "ports": [], "mode": "fast"},
                   {"name": "x", "ports": [999], "tags": {}}):
        assert Draft7Validator(b).is_valid(output) and Draft7Validator(REAL).is_valid(output)
    assert not Draft7Validator(b).is_valid({"name": "x" * 9, "ports": []})


def test_smallest_output_and_longest_bound():
    b = bounding.bound(REAL)
    assert bounding.smallest_output(b) == '{"name":"","ports":[]}'
    longest = bounding.longest_output_bytes(b)
    assert len(json.dumps({"name": "x" * 8, "ports": [999, 999], "mode": "safe", "tags": {}},
                          separators=(",", ":"))) <= longest < 200


@pytest.mark.parametrize(("schema", "why"), [
    ({"type": "string"}, "its root is not an object schema with properties"),
    ({"properties": {"a": {"$ref": "https://x/y.json"}}}, "$ref outside the document"),
    ({"properties": {"a": {"$ref": "#/definitions/n"}},
      "definitions": {"n": {"properties": {"next": {"$ref": "#/definitions/n"}}}}},
     "recursive $ref"),
    ({"properties": {"a": {"$ref": "#/definitions/gone"}}}, "$ref to nothing"),
    ({"properties": {"a": {"type": 12}}}, "not a valid JSON schema"),
])
def test_problem_names_what_keeps_a_schema_out(schema, why):
    assert bounding.problem(schema).startswith(why)


def test_a_required_pattern_has_no_smallest_output():
    b = bounding.bound({"properties": {"id": {"type": "string", "pattern": "^[a-z]+$"}},
                        "required": ["id"]})
    with pytest.raises(bounding.NoInstance, match="pattern"):
        bounding.smallest_output(b)


def entry(i: int, xgr: float, guidance: float | None = 1.0) -> CorpusSchema:
    return CorpusSchema(
        id=f"s{i:02d}", source=f"https://example.test/{i}.json", title=f"T{i}",
        json_schema={"type": "object", "properties": {f"p{i}": {"type": "boolean"}}},
        min_output_tokens=1,
        compile_ms={"xgrammar": xgr, **({"guidance": guidance} if guidance else {})},
        unsupported={} if guidance else {"guidance": "Unimplemented keys: ['if']"})


CORPUS = CorpusFile(
    provenance=CorpusProvenance(date="2026-12-01", gate_version="0.1.0", source="test",
                                tokenizer="t", max_output_tokens=96),
    schemas=[entry(i, xgr=float(i * 10), guidance=None if i % 4 == 0 else 1.0 + i)
             for i in range(12)])


def test_strata_cut_by_the_backends_own_cost():
    layers = strata(CORPUS.supported_by("xgrammar"), "xgrammar", 3)
    assert [[s.id for s in layer] for layer in layers][0] == ["s00", "s01", "s02", "s03"]
    assert max(s.compile_ms["xgrammar"] for s in layers[0]) < \
        min(s.compile_ms["xgrammar"] for s in layers[2])


def test_draw_is_seeded_stratified_and_filtered_per_backend():
    spec = CorpusSpec(file="x", size=5, strata=3, seed=1)
    first, again = draw(CORPUS, spec, "xgrammar"), draw(CORPUS, spec, "xgrammar")
    assert [s.id for s in first] == [s.id for s in again] and len(first) == 5
    layers = strata(CORPUS.supported_by("xgrammar"), "xgrammar", 3)
    per_layer = [sum(1 for s in first if s in layer) for layer in layers]
    assert per_layer == [1, 2, 2]  # the costliest strata take the remainder
    guidance = draw(CORPUS, spec, "guidance")
    assert not {s.id for s in guidance} & {"s00", "s04", "s08"}  # unsupported: left out
    assert [s.id for s in draw(CORPUS, spec.model_copy(update={"seed": 2}), "xgrammar")] != \
        [s.id for s in first]
    assert [s.id for s in draw(CORPUS, spec, "auto")] == [s.id for s in first]


def test_a_backend_with_nothing_to_draw_is_an_error():
    with pytest.raises(GateError, match="no schema that backend 'outlines' supports"):
        draw(CORPUS, CorpusSpec(file="x"), "outlines")


def test_the_drawn_schemas_are_in_the_plan_hash_and_the_load(tmp_path):
    path = tmp_path / "corpus.json"
    path.write_text(CORPUS.model_dump_json())
    data = load_plan("cpu-smoke").model_dump(mode="json", exclude_none=True)
    data["workload"]["corpus"] = {"file": str(path), "size": 4, "seed": 0}
    plan = parse_plan(data)
    reseeded = parse_plan({**data, "workload": {**data["workload"], "corpus": {
        "file": str(path), "size": 4, "seed": 5}}})
    assert plan.measurement_hash() != reseeded.measurement_hash()
    assert plan.measurement_hash() != plan.for_backend("guidance").measurement_hash()
    changed = CORPUS.model_copy(deep=True)
    for s in changed.schemas:
        s.json_schema["properties"]["q"] = {"type": "null"}
    before = plan.measurement_hash()
    path.write_text(changed.model_dump_json())
    assert parse_plan(data).measurement_hash() != before
    load = GuidedLoad.for_backend(plan.workload, "xgrammar")
    assert len(load.drawn) == 4 and load.schema(1, "free") is None
    assert load.schema(1, "guided") == load.drawn[1].json_schema
    assert load.schema(5, "guided") == load.drawn[1].json_schema  # cycled
    assert "v5" in load.schema(5, "unique")["required"]
    assert load.prompt(1).startswith(f"Fill in a JSON document for this schema ({load.drawn[1].id})")


def test_max_compile_ms_leaves_the_slowest_out_and_says_why():
    spec = CorpusSpec(file="x", size=12, strata=3, max_compile_ms=55.0)
    drawn = draw(CORPUS, spec, "xgrammar")
    assert max(s.compile_ms["xgrammar"] for s in drawn) <= 55.0 and len(drawn) == 6
    why = dict((s.id, w) for s, w in left_out(CORPUS, spec, "xgrammar"))
    assert why["s11"] == "compiles in 110 ms, over the plan's max_compile_ms (55)"
    assert "s04" not in why  # supported and fast enough


def test_untyped_nodes_long_strings_and_patterns_are_bounded():
    b = bounding.bound({"properties": {
        "any": {"description": "whatever"}, "text": {"maxLength": 160},
        "slug": {"type": "string", "pattern": "^[a-z]+$"},
        "when": {"type": "string", "format": "date-time"}}, "required": ["any"]})
    props = b["properties"]
    assert b["type"] == "object"
    assert props["any"] == {"description": "whatever", "type": "string",
                            "maxLength": bounding.STRING_MAX}
    assert "text" in props or "slug" in props  # the first optional ones are kept
    assert bounding.bound({"properties": {"t": {"maxLength": 160}}})["properties"]["t"] == {
        "maxLength": bounding.STRING_MAX, "type": "string"}
    pattern = bounding.bound({"properties": {"s": {"type": "string", "pattern": "^a+$"}}})
    assert pattern["properties"]["s"]["maxLength"] == bounding.STRING_MAX
    short = bounding.bound({"properties": {"w": {"type": "string", "format": "date-time"}}})
    assert "maxLength" not in short["properties"]["w"]
