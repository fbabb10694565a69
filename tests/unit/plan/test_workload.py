import json

import pytest

from gate.core.errors import GateError
from gate.plan.spec import WorkloadSpec
from gate.plan.workload import (
    PERSON_SCHEMA,
    GuidedLoad,
    output_length_bounds,
    prompts,
    request_body,
    schema_for,
    validate_output,
)


def test_valid_person_passes():
    assert validate_output('{"name":"Ann","age":3,"city":"Lima","tags":["a"]}', PERSON_SCHEMA) is None


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"name":"Ann"', "not JSON"),
        ('{"name":"Ann","age":300,"city":"Lima","tags":[]}', "age"),
        ('{"name":"Ann","age":3,"city":"Rome","tags":[]}', "city"),
        ('{"name":"Ann","age":3,"city":"Lima"}', "required"),
        ("Sure! Here is a person.", "not JSON"),
    ],
)
def test_invalid_outputs_say_why(text, why):
    problem = validate_output(text, PERSON_SCHEMA)
    assert problem is not None and why in problem


def test_unique_variants_differ_and_shared_does_not():
    shared = WorkloadSpec()
    assert schema_for(shared, 1) == schema_for(shared, 2)
    unique = WorkloadSpec(schema_variants="unique")
    a, b = schema_for(unique, 1), schema_for(unique, 2)
    assert a != b and "v1" in a["required"] and "v2" in b["properties"]
    assert "v1" not in PERSON_SCHEMA["properties"]  # the base schema is not mutated


def test_the_unique_arm_misses_the_cache_beside_a_shared_guided_arm():
    load = GuidedLoad.for_backend(WorkloadSpec(), "xgrammar")
    assert load.schema(1, "guided") == load.schema(2, "guided") == PERSON_SCHEMA
    a, b = load.schema(1, "unique"), load.schema(2, "unique")
    assert a != b and "v1" in a["required"] and "v2" in b["required"]
    assert load.schema(1, "free") is None
    assert load.prompt(0) == prompts(WorkloadSpec())[0]


def test_validation_follows_the_schemas_own_draft():
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
              "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": True}}}
    assert validate_output('{"n": 0}', draft4) is not None  # draft-04's boolean exclusive bound
    assert validate_output('{"n": 1}', draft4) is None


def test_bad_schema_is_a_clear_error():
    with pytest.raises(GateError, match="not a valid JSON schema"):
        schema_for(WorkloadSpec(json_schema={"type": 12}), 0)


def test_request_bodies_per_transport_and_arm():
    spec = WorkloadSpec()
    guided = request_body(spec, "m", prompt="p", guided=True, schema=PERSON_SCHEMA)
    assert guided["response_format"]["json_schema"]["schema"] == PERSON_SCHEMA
    assert guided["stream"] and guided["stream_options"] == {"include_usage": True}
    assert "ignore_eos" not in guided
    so = request_body(WorkloadSpec(schema_transport="structured_outputs"), "m", prompt="p",
                      guided=True, schema={})
    assert so["structured_outputs"] == {"json": {}} and "response_format" not in so
    free = request_body(spec, "m", prompt="p", guided=False, schema=None, free_max_tokens=17)
    assert free["ignore_eos"] is True and free["max_tokens"] == 17
    assert "response_format" not in free


def test_prompts_are_deterministic_per_seed():
    assert prompts(WorkloadSpec(seed=1)) == prompts(WorkloadSpec(seed=1))
    assert prompts(WorkloadSpec(seed=1)) != prompts(WorkloadSpec(seed=2))
    assert len(prompts(WorkloadSpec(prompt_count=5))) == 5


def test_output_length_bounds_are_those_of_the_shortest_and_longest_valid_output():
    """Checked against the compact JSON of the extreme instances themselves."""
    schema = {"type": "object", "additionalProperties": False,
              "required": ["id", "note", "kind", "ok", "rows"],
              "properties": {
                  "id": {"type": "integer", "minimum": -5, "maximum": 1200},
                  "note": {"type": "string", "minLength": 3, "maxLength": 7},
                  "kind": {"enum": ["a", "bbb"]},
                  "ok": {"type": "boolean"},
                  "rows": {"type": "array", "minItems": 1, "maxItems": 3,
                           "items": {"type": "integer", "minimum": 10, "maximum": 99}}}}
    shortest = {"id": 0, "note": "abc", "kind": "a", "ok": True, "rows": [10]}
    longest = {"id": 1200, "note": "abcdefg", "kind": "bbb", "ok": False, "rows": [10, 20, 30]}
    assert output_length_bounds(schema) == (len(json.dumps(shortest)), len(json.dumps(longest)))
    assert output_length_bounds(PERSON_SCHEMA) == (51, 78)


def test_output_length_bounds_of_an_unbounded_schema():
    assert output_length_bounds({"type": "array", "items": {"type": "boolean"}}) == (2, None)
    with pytest.raises(GateError, match="require every property"):
        output_length_bounds({"type": "object", "properties": {"a": {"type": "boolean"}}})
    with pytest.raises(GateError, match="no bound"):
        output_length_bounds({"type": "number"})
