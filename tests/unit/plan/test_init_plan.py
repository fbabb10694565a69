"""`gate plan init` from a folder of three schemas (tests/fixtures/own_schemas) and the tiny
model: a plan that loads, names its schemas relative to itself, sends each schema in turn and
validates each output against its own, with max_tokens that every bounded output fits."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from support.cli import gate_in_process
from support.paths import FIXTURES

from gate.core.errors import GateError
from gate.plan.init_plan import MAX_TOKENS_MARGIN, PlanRequest, choose_max_tokens, init_plan
from gate.plan.own_workload import load_schema_dir
from gate.plan.spec import load_plan
from gate.plan.workload import GuidedLoad, output_length_bounds, validate_output

SCHEMAS = FIXTURES / "own_schemas"


@pytest.fixture
def team(tmp_path):
    """A team's folder: its schemas, and a plans folder beside them."""
    shutil.copytree(SCHEMAS, tmp_path / "schemas")
    (tmp_path / "plans").mkdir()
    return tmp_path


def test_plan_init_writes_a_plan_that_loads_and_sends_each_schema_in_turn(team):
    out = team / "plans" / "mine.yaml"
    proc = gate_in_process("plan", "init", "--out", out, "--tiny-model", "--schemas",
                           team / "schemas", "--levels", "2,4")
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}: plan 'mine', 3 guided request source(s)" in proc.stdout
    assert yaml.safe_load(out.read_text())["workload"]["schema_dir"] == "../schemas"
    plan = load_plan(str(out))
    assert plan.workload.schema_dir == str((team / "schemas").resolve())
    assert plan.server.tiny_model is not None and plan.ab.servers == "persistent"
    assert plan.sweep.levels == [2, 4] and plan.drain.concurrency == 4
    longest = max(output_length_bounds(e.schema)[1] for e in load_schema_dir(SCHEMAS))
    assert plan.workload.max_tokens == longest + MAX_TOKENS_MARGIN

    load = GuidedLoad.for_backend(plan.workload, plan.backend)
    assert load.distinct_schemas == 3
    sent = [load.request(i, "guided", "m")[1] for i in range(3)]
    titles = sorted(s["title"] for s in sent)
    assert titles == ["Order", "Support ticket", "Weather"]
    assert load.request(3, "guided", "m")[1] == sent[0]  # cycled
    body, _ = load.request(1, "guided", "m")
    assert body["response_format"]["json_schema"]["schema"] == sent[1]
    assert "ticket.json" in body["messages"][0]["content"]
    ticket = '{"priority": "low", "open": true, "minutes": 5}'
    assert validate_output(ticket, sent[1]) is None  # its own schema
    assert validate_output(ticket, sent[0]) is not None  # another's: not valid
    assert load.request(1, "free", "m")[1] is None


def test_the_plan_hash_is_the_schemas_not_where_they_lie(team, tmp_path_factory):
    out = team / "plans" / "mine.yaml"
    assert gate_in_process("plan", "init", "--out", out, "--tiny-model", "--schemas",
                           team / "schemas").returncode == 0
    elsewhere = tmp_path_factory.mktemp("clone")
    shutil.copytree(team, elsewhere, dirs_exist_ok=True)
    here, there = load_plan(str(out)), load_plan(str(elsewhere / "plans" / "mine.yaml"))
    assert here.workload.schema_dir != there.workload.schema_dir
    assert here.measurement_hash() == there.measurement_hash()
    (elsewhere / "schemas" / "weather.json").write_text(json.dumps(
        {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"],
         "additionalProperties": False}))
    assert load_plan(str(elsewhere / "plans" / "mine.yaml")).measurement_hash() != \
        here.measurement_hash()


def test_a_gpu_plan_of_a_model_folder_keeps_the_teams_server_flags(team):
    model = team / "model"
    model.mkdir()
    out = team / "plans" / "gpu.yaml"
    proc = gate_in_process("plan", "init", "--out", out, "--model", model, "--schemas",
                           team / "schemas", "--server-arg=--enable-prefix-caching",
                           "--max-num-seqs", "64", "--server-env", "OMP_NUM_THREADS=8")
    assert proc.returncode == 0, proc.stderr
    plan = load_plan(str(out))
    assert plan.server.model == str(model.resolve()) and plan.server.tiny_model is None
    assert plan.server.extra_args == ["--enable-prefix-caching"]
    assert plan.server.max_num_seqs == 64 and plan.server.env["OMP_NUM_THREADS"] == "8"
    assert plan.ab.servers == "per_round" and plan.sweep.levels == [1, 8, 32]


def test_bad_input_is_named_and_nothing_is_overwritten(team):
    out = team / "plans" / "mine.yaml"
    out.write_text("mine\n")
    with pytest.raises(GateError, match="never overwrites a plan"):
        init_plan(PlanRequest(out=out, schema_dir=team / "schemas"))
    assert out.read_text() == "mine\n"
    (team / "schemas" / "broken.json").write_text('{"type": "nonsense"}')
    proc = gate_in_process("plan", "init", "--out", team / "plans" / "new.yaml",
                           "--tiny-model", "--schemas", team / "schemas")
    assert proc.returncode == 2 and "broken.json: not a valid JSON schema" in proc.stderr
    assert not (team / "plans" / "new.yaml").exists()


def test_an_unbounded_schema_gets_the_default_and_a_warning():
    from gate.plan.own_workload import OwnEntry

    free_text = OwnEntry(name="notes.json", schema={"type": "object", "properties": {
        "text": {"type": "string"}}, "required": ["text"], "additionalProperties": False})
    tokens, warnings = choose_max_tokens((free_text,), None)
    assert tokens == 512 and "no bound on the output length of notes.json" in warnings[0]
    assert choose_max_tokens((free_text,), 100) == (100, [])
