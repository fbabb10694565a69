"""Baselines: shipped files, loading errors, auto-matching, `gate baseline update`."""

from __future__ import annotations

import shutil

import pytest
from support.cli import gate_in_process
from support.factories import cell, drain_results, gpu_plan, make_results, results_folder
from support.paths import REPO_ROOT

from gate.core.errors import GateError
from gate.judge.baseline import (
    find_baseline,
    load_all,
    load_baseline,
    mismatches,
    model_key,
    plan_facts,
)
from gate.judge.compare import BaselineReference, compare_results
from gate.judge.verdict import Outcome
from gate.plan.spec import load_plan
from gate.plan.thresholds import Thresholds

BASELINES = REPO_ROOT / "baselines"
SEED = BASELINES / "a100-gemma4-26b--a100-80gb--gemma-4-26b-a4b-it.yaml"


def test_shipped_baselines_load():
    found = load_all(BASELINES)
    assert found
    seed = load_baseline(SEED)
    assert seed.figures["drain.req_per_min"].point == 233.0
    assert seed.provenance.kind == "reported" and "49013" in seed.provenance.url


def test_seed_baseline_matches_the_builtin_a100_plan():
    plan = load_plan("a100-gemma4-26b")
    assert model_key(plan) == "gemma-4-26b-a4b-it"
    seed = load_baseline(SEED)
    for key, value in seed.plan_facts.items():
        assert plan_facts(plan)[key] == value, key
    results = drain_results([233.0], plan=plan)
    assert mismatches(seed, results) == []


@pytest.mark.parametrize("head", [121.0, 224.0])
def test_the_reported_seed_baseline_is_shown_beside_the_run_never_judged(head):
    """The seed's 233 req/min is the reporter's harness (prompts, schema, client): a nightly
    of the plan's own workload is not failed, or passed, against it; it is shown."""
    path, baseline = find_baseline(BASELINES, drain_results([head]))
    assert path == SEED
    v = compare_results(drain_results([head]), BaselineReference(baseline, str(path)),
                        Thresholds())
    assert v.outcome == Outcome.PASS, v.headline
    assert not [c for c in v.checks if c.kind == "relative"]
    assert v.baseline == str(path) and v.mode == "baseline"
    (drain,) = [r for r in v.reported if r.name == "drain.req_per_min"]
    assert drain.reported == 233.0 and drain.measured == head
    assert drain.delta_pct == pytest.approx((head / 233.0 - 1) * 100)
    assert "beside the reported baseline, not judged" in v.headline
    assert any("not judged" in n and "first measured baseline" in n for n in v.notes)


def test_a_measured_baseline_of_the_same_figures_is_judged():
    _, reported = find_baseline(BASELINES, drain_results([233.0]))
    measured = reported.model_copy(update={"provenance": reported.provenance.model_copy(
        update={"kind": "measured", "url": None})})
    v = compare_results(drain_results([121.0, 122.0, 120.0]), BaselineReference(measured),
                        Thresholds())
    assert v.outcome == Outcome.FAIL and not v.reported, v.headline


def test_auto_mismatch_names_the_difference():
    with pytest.raises(GateError) as err:
        find_baseline(BASELINES, drain_results([200.0], gpu="NVIDIA H100 80GB HBM3"))
    assert "hardware" in str(err.value) and "H100" in str(err.value)
    other_model = drain_results([200.0], plan=gpu_plan(model="google/gemma-4-31B-it"))
    with pytest.raises(GateError, match="model: baseline 'gemma-4-26b-a4b-it', results 'gemma-4-31b-it'"):
        find_baseline(BASELINES, other_model)
    smaller_batch = drain_results([200.0], plan=gpu_plan(max_num_seqs=32))
    with pytest.raises(GateError, match="max_num_seqs: baseline 64, results 32"):
        find_baseline(BASELINES, smaller_batch)


def test_auto_without_candidates_suggests_ab(tmp_path):
    with pytest.raises(GateError, match="--against"):
        find_baseline(tmp_path, drain_results([200.0]))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("plan: [unclosed", "not valid YAML"),
        ("plan: x\nhardware_key: h\nmodel: m\nprovenance: {kind: measured}\nfigures: {}\n", "figures"),
        ("plan: x\nhardware_key: h\nmodel: m\nprovenance: {kind: guessed}\nfigures: {a: {mean: 1}}\n",
         "provenance.kind"),
        ("plan: x\nhardware_key: h\nmodel: m\nprovenance: {kind: measured}\nfigures: {a: {std: 1}}\n",
         "figures.a"),
        ("plan: x\nhardware_key: h\nmodel: m\nprovenance: {kind: measured}\nfigures: {a: {mean: 1}}\ntypo: 1\n",
         "typo: unknown key"),
    ],
)
def test_broken_baseline_names_file_and_key(tmp_path, text, words):
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(GateError) as err:
        load_baseline(path)
    assert str(path) in str(err.value) and words in str(err.value)


# ---------------------------------------------------------------- update


@pytest.fixture
def no_ci_branch(monkeypatch):
    """No GITHUB_REF_NAME or GITHUB_SHA: the branch and commit come from the command line."""
    monkeypatch.delenv("GITHUB_REF_NAME", raising=False)
    monkeypatch.delenv("GITHUB_SHA", raising=False)


def _saved(results, tmp_path, name="run"):
    return results_folder(tmp_path / name, results)


def _sweep_run(rpm_values):
    cells = []
    for r, rpm in enumerate(rpm_values):
        cells.append(cell("drain", "guided", 64, r, rpm=rpm))
        cells += [cell("sweep", "guided", 8, r, tpot_p50=21.0), cell("sweep", "free", 8, r, tpot_p50=20.0)]
    return make_results(cells, plan=gpu_plan(levels=(8,), repeats=len(rpm_values)))


def test_update_writes_then_keeps_history(no_ci_branch, tmp_path):
    store = tmp_path / "baselines"
    first = _saved(_sweep_run([230.0, 232.0]), tmp_path, "first")
    proc = gate_in_process("baseline", "update", first, "--baselines-dir", store,
                           "--branch", "main", "--commit", "abc1234")
    assert proc.returncode == 0, proc.stderr
    (path,) = store.glob("*.yaml")
    b = load_baseline(path)
    assert b.figures["drain.req_per_min"].values == [230.0, 232.0]
    assert b.figures["sweep.c8.tpot_p50_ms"].values == [21.0, 21.0]
    assert b.provenance.kind == "measured" and b.provenance.commit == "abc1234"
    assert b.plan_hash == gpu_plan(levels=(8,)).measurement_hash()

    second = _saved(_sweep_run([228.0, 229.0, 227.0]), tmp_path, "second")
    proc = gate_in_process("baseline", "update", second, "--baselines-dir", store,
                           "--branch", "main", "--commit", "def5678")
    assert proc.returncode == 0, proc.stderr
    assert list(store.glob("*.yaml")) == [path]
    b = load_baseline(path)
    assert b.figures["drain.req_per_min"].values == [228.0, 229.0, 227.0]
    assert [h.provenance.commit for h in b.history] == ["abc1234"]
    assert b.history[0].figures["drain.req_per_min"].values == [230.0, 232.0]
    # and compare --baseline auto finds it
    found, _ = find_baseline(store, _sweep_run([228.0]))
    assert found == path


def test_update_over_reported_seed_keeps_it_in_history(no_ci_branch, tmp_path):
    store = tmp_path / "baselines"
    shutil.copytree(BASELINES, store)
    run = _saved(_sweep_run([231.0, 234.0]), tmp_path)
    proc = gate_in_process("baseline", "update", run, "--baselines-dir", store, "--branch", "main")
    assert proc.returncode == 0, proc.stderr
    b = load_baseline(store / SEED.name)
    assert b.provenance.kind == "measured" and b.history[0].provenance.kind == "reported"
    assert b.hardware_key == "1x NVIDIA A100-SXM4-80GB"


@pytest.mark.parametrize(
    ("results", "argv", "words"),
    [
        (lambda: _sweep_run([230.0]), ["--branch", "feature/x"], "not the default branch"),
        (lambda: _sweep_run([230.0]), [], "cannot tell which branch"),
        (lambda: make_results([cell("drain", "guided", 64, failed=3)]), ["--branch", "main"], "failed"),
        (lambda: make_results([cell("drain", "guided", 64, invalid=1)]), ["--branch", "main"], "not valid JSON"),
        (lambda: make_results([cell("drain", "guided", 64)], status="error"), ["--branch", "main"],
         "not complete"),
    ],
)
def test_update_refuses_and_leaves_file_byte_identical(no_ci_branch, tmp_path, results, argv,
                                                       words):
    store = tmp_path / "baselines"
    shutil.copytree(BASELINES, store)
    before = {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file()}
    run = _saved(results(), tmp_path)
    proc = gate_in_process("baseline", "update", run, "--baselines-dir", store, *argv)
    assert proc.returncode == 2 and words in proc.stderr
    assert {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file()} == before


def test_update_branch_from_environment(no_ci_branch, tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_REF_NAME", "trunk")
    run = _saved(_sweep_run([230.0]), tmp_path)
    store = tmp_path / "b"
    update = ("baseline", "update", run, "--baselines-dir", store, "--default-branch", "trunk")
    assert gate_in_process(*update).returncode == 0
    assert load_baseline(next(store.glob("*.yaml"))).provenance.branch == "trunk"
    monkeypatch.setenv("GITHUB_REF_NAME", "pr-branch")
    assert gate_in_process(*update).returncode == 2
    assert gate_in_process(*update, "--force-branch").returncode == 0


def test_full_a100_plan_run_against_reported_seed_baseline():
    plan = load_plan("a100-gemma4-26b")
    cells = [cell("drain", "guided", 64, rpm=224.0)]
    for level in plan.sweep.levels:
        cells += [cell("sweep", "guided", level, tpot_p50=10.5), cell("sweep", "free", level, tpot_p50=10.0)]
    results = make_results(cells, plan=plan)
    path, baseline = find_baseline(BASELINES, results)
    v = compare_results(results, BaselineReference(baseline, str(path)), plan.thresholds)
    assert v.outcome == Outcome.PASS, v.headline
    # the drain is shown beside the reported figure; the guided/free bound is still judged
    assert [r.name for r in v.reported] == ["drain.req_per_min"]
    assert [c.name for c in v.checks if c.kind == "relative"] == []
    assert {c.name for c in v.checks if c.kind == "absolute"} == {
        f"bound.c{level}.tpot_p50" for level in plan.sweep.levels if level >= 8}
