"""A plan made by `gate plan init` runs (issue 30, item 2): from the folder of three schemas
(tests/fixtures/own_schemas) and the tiny model, with the stand-in package first on the
server's PYTHONPATH (the plan's own `--server-env`, as support.vllm_helpers.stand_in_plan does
for its plans), `gate run` of the plan as written measures, and every guided output is
validated against its own schema: request i asks for schema i mod 3, in the folder's order.
A server whose outputs of one schema leave out a required property (the stand-in's
FAKE_VLLM_INVALID_TITLE) is a broken measurement that names the violation.
"""

from __future__ import annotations

import re

import pytest
from support.cli import gate_subprocess
from support.fake_vllm import INVALID_TITLE
from support.paths import FAKE_VLLM, FIXTURES

from gate.core.errors import EXIT_ERROR, EXIT_PASS
from gate.measure.results import load_results
from gate.plan.own_workload import load_schema_dir
from gate.plan.spec import load_plan
from gate.plan.workload import validate_output

SCHEMAS = FIXTURES / "own_schemas"
ENTRIES = load_schema_dir(SCHEMAS)  # order.json, ticket.json, weather.json
GUIDED = ("guided", "unique")


@pytest.fixture(scope="module")
def own_plan(tmp_path_factory, tiny_model_dir):
    folder = tmp_path_factory.mktemp("own-plan")
    plan = folder / "mine.yaml"
    proc = gate_subprocess("plan", "init", "--out", plan, "--tiny-model", "--schemas", SCHEMAS,
                           "--levels", "2", "--server-env", f"PYTHONPATH={FAKE_VLLM}")
    assert proc.returncode == EXIT_PASS, proc.stderr
    assert f"wrote {plan}: plan 'mine', 3 guided request source(s)" in proc.stdout
    return plan


def run_plan(plan, out, **env):
    """`gate run` of the plan as written; the command line only shortens it (no drain, one
    second windows)."""
    return gate_subprocess("run", "--plan", plan, "--out", out, "--no-drain", "--window", "1",
                           env=env, timeout=300)


def own_schema(index: int) -> dict:
    return ENTRIES[index % len(ENTRIES)].schema


def test_a_plan_from_three_schemas_runs_and_validates_each_output_against_its_own(own_plan):
    plan = load_plan(str(own_plan))
    assert plan.server.tiny_model is not None and plan.workload.schema_dir is not None
    assert [e.name for e in ENTRIES] == ["order.json", "ticket.json", "weather.json"]
    out = own_plan.parent / "run"
    proc = run_plan(own_plan, out)
    assert proc.returncode == EXIT_PASS, proc.stdout[-3000:] + proc.stderr[-2000:]
    results = load_results(out)
    assert results.status == "complete" and results.fingerprint.versions["vllm"] == "0.0.0+standin"
    guided = [r for r in results.records if r.arm in GUIDED]
    assert guided and all(r.ok for r in guided)
    assert all(r.json_valid is True and r.validation_error is None for r in guided)
    # each output follows its own schema, and no other: the check is against its own
    for r in guided:
        assert validate_output(r.text, own_schema(r.index)) is None, (r.index, r.text)
        others = [own_schema(r.index + k) for k in (1, 2)]
        assert all(validate_output(r.text, s) is not None for s in others), (r.index, r.text)
    assert {r.index % 3 for r in guided if r.phase == "sweep"} == {0, 1, 2}
    sweep = [c for c in results.cells if c.key.arm == "guided"]
    assert sweep and all(c.valid_outputs == c.completed and not c.invalid_outputs for c in sweep)


def test_outputs_that_break_one_schema_are_an_error_naming_the_violation(own_plan):
    """The warm-up already sends each schema: the run stops there, naming weather.json's
    missing property and the output that lacks it; only that schema's outputs are counted
    invalid (k of n in each batch, k < n)."""
    out = own_plan.parent / "invalid"
    proc = run_plan(own_plan, out, **{INVALID_TITLE: "Weather"})
    assert proc.returncode == EXIT_ERROR, proc.stdout[-3000:] + proc.stderr[-2000:]
    results = load_results(out)
    assert results.status == "error" and not results.cells
    said = "\n".join(results.errors)
    counts = [(int(k), int(n)) for k, n in re.findall(
        r"(\d+) of (\d+) guided outputs do not follow the schema \(first: schema violation at "
        r"\(root\): 'sky' is a required property; text '\{\"city\":", said)]
    assert counts and all(0 < k < n for k, n in counts), said
    assert "guided outputs do not follow the schema" in proc.stdout
