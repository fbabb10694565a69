from pathlib import Path

import pytest

from gate.core.errors import GateError
from gate.plan.spec import BUILTIN_PLANS, apply_overrides, load_plan, parse_plan


def minimal(**extra):
    return {"name": "p", "server": {"model": "/models/x"}, **extra}


def test_builtin_plans_load_and_differ():
    hashes = {load_plan(name).measurement_hash() for name in BUILTIN_PLANS}
    assert len(hashes) == len(BUILTIN_PLANS)
    assert load_plan(None).name == "cpu-smoke"


def test_seed_harness_plan_mirrors_the_report():
    plan = load_plan("a100-gemma4-26b")
    assert plan.server.max_num_seqs == 64
    assert plan.server.speculative_config["method"] == "ngram"
    assert plan.server.speculative_config["num_speculative_tokens"] == 5
    assert plan.drain.requests == 2000
    assert plan.sweep.levels == [1, 8, 16, 32, 64]


def test_unknown_key_is_named():
    with pytest.raises(GateError, match=r"drain\.concurency: unknown key"):
        parse_plan(minimal(drain={"concurency": 3}))


def test_wrong_value_is_named():
    with pytest.raises(GateError, match=r"sweep\.levels"):
        parse_plan(minimal(sweep={"levels": [1, 0]}))


def test_model_source_must_be_exactly_one():
    with pytest.raises(GateError, match="exactly one of server.model and server.tiny_model"):
        parse_plan({"name": "p", "server": {}})
    with pytest.raises(GateError, match="exactly one"):
        parse_plan({"name": "p", "server": {"model": "m", "tiny_model": {}}})


def test_prompt_template_must_format():
    with pytest.raises(GateError, match="prompt_template"):
        parse_plan(minimal(workload={"prompt_template": "hello {name}"}))


def test_broken_yaml_is_a_clear_error(tmp_path: Path):
    bad = tmp_path / "plan.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(GateError, match="not valid YAML"):
        load_plan(bad)
    bad.write_text("- a list\n")
    with pytest.raises(GateError, match="expected a mapping"):
        load_plan(bad)


def test_missing_plan_names_the_builtins():
    with pytest.raises(GateError, match="cpu-smoke"):
        load_plan("no-such-plan.yaml")


def test_overrides_revalidate_and_apply():
    plan = apply_overrides(load_plan("cpu-smoke"), repeats=3, levels=[2, 4], drain_requests=10)
    assert (plan.repeats, plan.sweep.levels, plan.drain.requests) == (3, [2, 4], 10)
    with pytest.raises(GateError, match="repeats"):
        apply_overrides(plan, repeats=0)


def test_measurement_hash_ignores_port_and_repeats_but_not_workload():
    a = parse_plan(minimal())
    b = parse_plan(minimal(repeats=5, server={"model": "/models/x", "port": 9000}))
    c = parse_plan(minimal(workload={"max_tokens": 99}))
    assert a.measurement_hash() == b.measurement_hash()
    assert a.measurement_hash() != c.measurement_hash()
