from pathlib import Path

import pytest
import yaml
from support.paths import REPO_ROOT
from support.vllm_helpers import small_plan

from gate.core.errors import GateError
from gate.plan.spec import BUILTIN_PLANS, apply_overrides, load_plan, parse_plan, pin_runner


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


# ---- the model runner pin, the launch and what the hash leaves out ---------------------------

def test_a_runner_pin_vllm_cannot_read_is_named_with_the_fix():
    with pytest.raises(GateError, match=r"VLLM_USE_V2_MODEL_RUNNER='true': vLLM reads it with "
                                        r"int\(\).*use 0 \(V1 model runner\) or 1 \(V2\)"):
        parse_plan(minimal(server={"model": "/m", "env": {"VLLM_USE_V2_MODEL_RUNNER": "true"}}))
    plan = parse_plan(minimal(server={"model": "/m", "env": {"VLLM_USE_V2_MODEL_RUNNER": "0"}}))
    assert plan.server.pinned_runner() == "v1"


def test_pinning_a_runner_sets_vllms_switch_and_changes_the_hash():
    plan = load_plan("cpu-smoke")
    assert plan.server.pinned_runner() is None
    v1, v2 = pin_runner(plan, "v1"), pin_runner(plan, "v2")
    assert v1.server.env["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    assert v2.server.env["VLLM_USE_V2_MODEL_RUNNER"] == "1"
    assert len({plan.measurement_hash(), v1.measurement_hash(), v2.measurement_hash()}) == 3
    assert pin_runner(v2, "auto").measurement_hash() == plan.measurement_hash()
    assert pin_runner(plan, None) is plan
    with pytest.raises(GateError, match="choose v1, v2 or auto"):
        pin_runner(plan, "v3")


def test_cpu_smoke_still_matches_its_shipped_noise_profile():
    """Launching through `vllm serve` instead of the deprecated module, and stating what a
    run should show, leave the plan's measurement as it was calibrated."""
    profile = yaml.safe_load((REPO_ROOT / "baselines/noise/cpu-smoke--cpu-amd-epyc.yaml")
                             .read_text())
    plan = load_plan("cpu-smoke")
    assert plan.server.launch == "serve"
    assert plan.measurement_hash() == profile["plan_hash"]
    module = plan.model_copy(update={"server": plan.server.model_copy(update={"launch": "module"})})
    assert module.measurement_hash() == plan.measurement_hash()
    command = plan.server.model_copy(update={"launch": "command", "command": ["taskset", "-c",
                                                                              "0", "vllm"]})
    assert plan.model_copy(update={"server": command}).measurement_hash() != \
        plan.measurement_hash()
    expecting = plan.model_copy(deep=True)
    expecting.workload.expected.output_tokens = 999
    assert expecting.measurement_hash() == plan.measurement_hash()


def test_the_tests_shrunk_plan_judges_what_cpu_smoke_judges(tmp_path):
    """The end-to-end tests' plan (tests/support/vllm_helpers.small_plan) has shorter cells,
    not other checks: cpu-smoke's null thresholds (tails, the absolute guided/free bound)
    stay null instead of coming back judged at their defaults."""
    path, name = small_plan(tmp_path, **{"sweep.levels": [4]})
    shrunk, smoke = load_plan(str(path)), load_plan("cpu-smoke")
    assert shrunk.thresholds == smoke.thresholds and shrunk.thresholds.tpot_p99_pct is None
    assert shrunk.server.served_model_name == name and shrunk.sweep.levels == [4]


def test_longer_cells_for_some_levels_are_their_own_measurement():
    """sweep.level_window_s gives some levels' cells more time (a round's noise shrinks with
    its window): it changes the measured cells and so the hash, and leaves the hash of every
    plan without it as it was."""
    plan = load_plan("cpu-smoke")
    data = plan.model_dump(mode="json")
    data["sweep"]["level_window_s"] = {4: 12}
    longer = parse_plan(data)
    assert longer.sweep.window_at(4) == 12 and longer.sweep.window_at(8) == plan.sweep.window_s
    assert longer.measurement_hash() != plan.measurement_hash()
    assert plan.measurement_hash() == "d5cf5a0968023a1a"  # the kept calibrations' hash
    for bad, why in (({16: 12}, "names a level"), ({4: 99}, "max_window_s")):
        data["sweep"]["level_window_s"] = bad
        with pytest.raises(GateError, match=why):
            parse_plan(data)


def test_the_isolation_of_the_idle_server_is_a_plan_key_defaulting_to_shared():
    plan = load_plan("cpu-smoke")
    assert plan.ab.isolation == "shared"
    paused = apply_overrides(plan, ab={"isolation": "paused"})
    assert paused.ab.isolation == "paused"
    assert paused.measurement_hash() == plan.measurement_hash()  # the cells are the same
