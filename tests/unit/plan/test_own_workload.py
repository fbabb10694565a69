"""A team's own workload files (gate.plan.own_workload): a folder of schemas, recorded
requests replayed with their own messages, schema and max_tokens, and a clear error naming
the file and line of anything unusable."""

from __future__ import annotations

import json

import pytest
from support.paths import FIXTURES

from gate.core.errors import GateError
from gate.plan.own_workload import digest, load_recorded, load_schema_dir, recorded_entry
from gate.plan.spec import WorkloadSpec
from gate.plan.workload import GuidedLoad

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
          "additionalProperties": False}


def line(**body) -> str:
    return json.dumps(body)


def test_a_schema_folder_is_its_json_files_in_name_order():
    entries = load_schema_dir(FIXTURES / "own_schemas")
    assert [e.name for e in entries] == ["order.json", "ticket.json", "weather.json"]
    assert entries[1].title == "Support ticket"


def test_recorded_requests_are_replayed_with_their_own_messages_schema_and_max_tokens(tmp_path):
    path = tmp_path / "traffic.jsonl"
    messages = [{"role": "system", "content": "be terse"}, {"role": "user", "content": "go"}]
    path.write_text("\n".join([
        line(messages=messages, max_tokens=300, response_format={
            "type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}),
        "",
        line(prompt="fill it", max_completion_tokens=40, structured_outputs={"json": SCHEMA}),
        line(messages=[{"role": "user", "content": "old"}], guided_json=SCHEMA),
    ]) + "\n")
    spec = WorkloadSpec(recorded_requests=str(path), max_tokens=64)
    load = GuidedLoad.for_backend(spec, "xgrammar")
    bodies = [load.request(i, "guided", "m")[0] for i in range(3)]
    assert bodies[0]["messages"] == messages and bodies[0]["max_tokens"] == 300
    assert bodies[1]["messages"] == [{"role": "user", "content": "fill it"}]
    assert bodies[1]["max_tokens"] == 40
    assert bodies[2]["max_tokens"] == 64  # none of its own: the plan's
    assert all(b["response_format"]["json_schema"]["schema"] == SCHEMA for b in bodies)
    free, schema = load.request(0, "free", "m", free_max_tokens=12)
    assert schema is None and free["max_tokens"] == 12 and free["messages"] == messages
    assert load.request(3, "guided", "m")[0]["max_tokens"] == 300  # cycled


@pytest.mark.parametrize("body, why", [
    ({"messages": [{"role": "user", "content": "x"}]}, "carries no schema"),
    ({"schema": SCHEMA}, "has neither messages nor a prompt"),
    ({"prompt": "x", "schema": SCHEMA, "max_tokens": 0}, "max_tokens must be a positive"),
    ({"prompt": "x", "schema": {"type": 12}}, "not a valid JSON schema"),
    ({"messages": "hi", "schema": SCHEMA}, "messages must be a list of objects"),
])
def test_an_unusable_line_is_named(body, why):
    with pytest.raises(GateError, match=f"recorded request traffic.jsonl:7.*{why}"):
        recorded_entry(json.dumps(body), "traffic.jsonl:7")


def test_empty_or_missing_sources_are_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(GateError, match="holds no \\*.json schema file"):
        load_schema_dir(tmp_path / "empty")
    (tmp_path / "blank.jsonl").write_text("\n\n")
    with pytest.raises(GateError, match="holds no request"):
        load_recorded(tmp_path / "blank.jsonl")
    with pytest.raises(GateError, match="is not a file"):
        load_recorded(tmp_path / "missing.jsonl")


def test_one_schema_source_at_a_time():
    with pytest.raises(ValueError, match="not json_schema and schema_dir"):
        WorkloadSpec(json_schema="person", schema_dir="x")


def test_the_digest_follows_what_is_sent():
    a = recorded_entry(line(prompt="x", schema=SCHEMA, max_tokens=5), "f:1")
    b = recorded_entry(line(prompt="x", schema=SCHEMA, max_tokens=6), "f:1")
    assert digest((a,)) != digest((b,)) and digest((a,)) == digest((a,))
