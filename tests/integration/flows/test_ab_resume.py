"""`gate ab` as a real subprocess on this machine, where no vllm serve is needed: asked to start
only from a calibration (--no-screening) it refuses without one, and it refuses a budget that
holds no block (exit 5, naming the fix, no server started); `--resume DIR` continues the
sequential test recorded
in DIR's ab-state.json and results (the round trip of the state file), or refuses, naming why.

The recorded results carry this machine's real fingerprint (taken with the gate's own
interpreter, as gate ab takes it), so the resume's checks of runner and build pass or fail
for real."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support.calibrations import calibration_for, store_for
from support.cli import gate_subprocess
from support.factories import cell, make_results
from support.vllm_helpers import server_processes, small_plan

from gate.core.errors import EXIT_BAD_INPUT, EXIT_UNDECIDED
from gate.flows.ab_state import STATE_FILE, ABState, BuildIdentity, FixedDesign, load_state
from gate.judge.checks import planned_slots
from gate.judge.compare import ABReference, compare_results
from gate.judge.noise import Noise, runner_key
from gate.judge.verdict import Outcome, load_verdict
from gate.measure.results import Results, save_results
from gate.plan.spec import load_plan
from gate.runner.fingerprint import take_fingerprint

PLAN = load_plan("cpu-smoke")
NAMES = ("drain.req_per_min", "sweep.c4.tpot_p50_ms", "sweep.c8.tpot_p50_ms", "ratio.c8.tpot_p50")


@pytest.fixture(scope="module")
def this_machine():
    env = {**os.environ, **PLAN.server.env}
    return take_fingerprint(python=sys.executable, env=env)


def recorded(fp, label: str, tpot_c8: list[float], max_rounds: int = 16) -> Results:
    """cpu-smoke results of `gate ab` on this machine, one round per value."""
    cells = []
    for r, tpot in enumerate(tpot_c8):
        cells += [cell("drain", "guided", 8, r, rpm=900.0),
                  cell("sweep", "guided", 4, r, tpot_p50=10.0),
                  cell("sweep", "free", 4, r, tpot_p50=5.0),
                  cell("sweep", "guided", 8, r, tpot_p50=tpot),
                  cell("sweep", "free", 8, r, tpot_p50=7.0)]
    plan = PLAN.model_copy(update={"repeats": len(tpot_c8)})
    res = make_results(cells, plan=plan, fp=fp, label=label)
    return res.model_copy(update={"sequential_rounds": max_rounds})


def write_ab(folder: Path, fp, head_tpot: list[float], *, finished: bool = False,
             rounds: int | None = None) -> tuple[Results, Results, Noise]:
    base = recorded(fp, "base", [15.0] * len(head_tpot))
    head = recorded(fp, "head", head_tpot)
    for res in (base, head):
        save_results(res, folder / res.label / "results.json")
    noise = Noise((calibration_for(head, names=NAMES, between=0.01, within=0.03),), "recorded")
    identity = BuildIdentity.of(sys.executable, {}, fp)
    design = FixedDesign(rounds_per_block=2, max_rounds=16, block_s=200.0, checks=list(NAMES),
                         description="recorded design")
    state = ABState(plan=PLAN.name, plan_hash=PLAN.measurement_hash(), runner_key=runner_key(fp),
                    thresholds=PLAN.thresholds, design=design,
                    calibrations=list(noise.calibrations), noise_description=noise.description,
                    builds={"base": identity, "head": identity},
                    rounds_done=rounds or len(head_tpot), finished=finished)
    (folder / STATE_FILE).write_text(state.model_dump_json(indent=1))
    return base, head, noise


def gate(*args: str, cache: Path) -> tuple[int, str, str]:
    proc = gate_subprocess(*args, env={"GATE_CACHE_DIR": str(cache)}, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def test_resume_continues_the_recorded_test_with_its_design_and_calibration(
        tmp_path, this_machine):
    # head 8% slower at c=8 in both rounds: not decided after one block
    base, head, noise = write_ab(tmp_path / "ab", this_machine, [16.2, 16.2])
    code, out, err = gate("ab", "--resume", str(tmp_path / "ab"), "--budget-minutes", "0.01",
                          "--quiet", cache=tmp_path / "cache")
    verdict = load_verdict(tmp_path / "ab" / "verdict.json")
    assert code == verdict.exit_code, err
    # the same test: gate compare on the files with the state's calibration agrees
    again = compare_results(head, ABReference(base), PLAN.thresholds, noise=noise)
    assert [(c.name, c.outcome, c.decided_at_round) for c in verdict.checks] == \
        [(c.name, c.outcome, c.decided_at_round) for c in again.checks]
    assert verdict.noise_profile == "recorded" and verdict.rounds == 2
    state = load_state(tmp_path / "ab" / STATE_FILE)
    assert state.rounds_done == 2 and not state.finished and state.outcome == verdict.outcome
    assert state.design.max_rounds == 16 and state.noise().description == "recorded"
    assert any(f"gate ab --resume {tmp_path / 'ab'}" in n for n in verdict.notes)
    saved = json.loads((tmp_path / "ab" / "head" / "results.json").read_text())
    assert saved["sequential_rounds"] == 16 and len(saved["cells"]) == len(head.cells)


def test_resume_refuses_a_finished_test_and_results_that_do_not_belong(tmp_path, this_machine):
    write_ab(tmp_path / "done", this_machine, [15.0, 15.0], finished=True)
    code, _, err = gate("ab", "--resume", str(tmp_path / "done"), cache=tmp_path / "cache")
    assert code == EXIT_BAD_INPUT and "its sequential test is over" in err
    write_ab(tmp_path / "other", this_machine, [15.0, 15.0, 15.0], rounds=2)
    code, _, err = gate("ab", "--resume", str(tmp_path / "other"), cache=tmp_path / "cache")
    assert code == EXIT_BAD_INPUT and "head results hold 3 rounds, the state 2" in err
    assert "Traceback" not in err


def test_resume_refuses_what_would_change_the_test(tmp_path):
    code, _, err = gate("ab", "--resume", str(tmp_path), "--threshold", "tpot_p50_pct=20",
                        cache=tmp_path / "cache")
    assert code == EXIT_BAD_INPUT and "--threshold cannot change it" in err
    code, _, err = gate("ab", "--resume", str(tmp_path), cache=tmp_path / "cache")
    assert code == EXIT_BAD_INPUT and "no ab-state.json there" in err


def test_no_calibration_stops_before_any_server_when_asked_and_names_the_fix(tmp_path):
    """Asked to start only from a calibration (by default an uncalibrated A/B learns the
    runner's noise from its own blocks: tests/e2e), `gate ab` measures nothing without one."""
    plan, marker = small_plan(tmp_path)
    code, out, err = gate("ab", "--plan", str(plan), "--out", str(tmp_path / "ab"),
                          "--noise-dir", str(tmp_path / "noise"), "--no-screening",
                          cache=tmp_path / "cache")
    assert code == EXIT_UNDECIDED, err
    # the plan file, not the built-in plan of the same name: that one measures other cells
    assert "no calibration of this runner" in out and f"gate calibrate --plan {plan} " in out
    assert "gate ab --calibrate" in out and "Traceback" not in err
    verdict = load_verdict(tmp_path / "ab" / "verdict.json")
    assert verdict.outcome == Outcome.UNDECIDED and verdict.exit_code == EXIT_UNDECIDED
    assert verdict.decide_with and f"gate calibrate --plan {plan} " in verdict.decide_with
    assert server_processes(marker) == [] and not (tmp_path / "ab" / "head").exists()


def test_a_budget_that_holds_no_block_is_refused_before_any_server(tmp_path, this_machine):
    plan, marker = small_plan(tmp_path, **{"sweep.levels": [4, 8]})
    probe = recorded(this_machine, "head", [15.0]).model_copy(
        update={"plan": load_plan(str(plan)), "plan_hash": load_plan(str(plan)).measurement_hash()})
    # every check the plan judges; a block costs 60 s + 2 x 90 s on this calibration
    every = tuple(s.name for s in planned_slots(load_plan(str(plan)), load_plan(str(plan)).thresholds))
    store_for(tmp_path / "cache" / "noise", probe, names=every, between=0.01, within=0.03)
    code, out, err = gate("ab", "--plan", str(plan), "--out", str(tmp_path / "ab"),
                        "--budget-minutes", "1", "--noise-dir", str(tmp_path / "none"),
                        cache=tmp_path / "cache")
    assert code == EXIT_UNDECIDED, err
    assert "a budget of 1 runner minutes holds no block" in out, out
    assert "raise --budget-minutes to at least 4" in out
    assert load_verdict(tmp_path / "ab" / "verdict.json").decide_with.startswith(
        "--budget-minutes ")
    assert server_processes(marker) == []
