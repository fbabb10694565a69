"""The model-runner rule on the CPU, through real `gate ab` and `gate run` processes and the
stand-in server (tests/support/fake_vllm.py: it reads VLLM_USE_V2_MODEL_RUNNER as vLLM does
and logs the lines of the runner that would serve, as vLLM's own logs name it).

- an A/B whose two servers report different runners is refused before any cell is measured:
  an `error` verdict naming both runners, in both server modes;
- one whose servers report the same runner is measured and judged, from nothing (no
  calibration) too: a doubled step fails in the first block, an A/A passes;
- in every run the fingerprint and the runner doctor name the same runner.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support.calibrations import store_for
from support.cli import gate_subprocess
from support.factories import cell, make_results
from support.fake_plan import fake_plan

from gate.core.errors import EXIT_ERROR, EXIT_FAIL, EXIT_INCONCLUSIVE
from gate.judge.checks import planned_slots
from gate.judge.verdict import Outcome, load_verdict
from gate.measure.results import load_results
from gate.plan.spec import load_plan
from gate.runner.fingerprint import take_fingerprint


def ab(tmp_path: Path, *extra: str, servers: str = "persistent", env=None, max_rounds: int = 2):
    out = tmp_path / "ab"
    proc = gate_subprocess("ab", "--plan", str(fake_plan(tmp_path, servers, max_rounds)),
                           "--out", str(out), "--profile", "never", *extra, env=env,
                           timeout=300)
    return proc, out


def agree(results) -> str:
    """The runner the fingerprint and the doctor both name (they must be one)."""
    assert results.doctor is not None and results.doctor.served is not None
    assert results.fingerprint.model_runner == results.doctor.served.model_runner
    assert results.fingerprint.model_runner_source == "server log"
    return results.fingerprint.model_runner


@pytest.mark.parametrize("servers", ["persistent", "per_round"])
def test_two_servers_on_different_runners_are_refused(tmp_path, servers):
    proc, out = ab(tmp_path, "--head-env", "VLLM_USE_V2_MODEL_RUNNER=1", servers=servers)
    assert proc.returncode == EXIT_ERROR, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    verdict = load_verdict(out / "verdict.json")
    assert verdict.outcome is Outcome.ERROR
    assert verdict.headline.startswith("ERROR: the measurement cannot be judged: model runner "
                                       "differs: base V1 model runner (server log), head V2")
    assert any("the base server runs the V1 model runner and the head server the V2 model "
               "runner" in e for e in verdict.errors)
    base, head = load_results(out / "base"), load_results(out / "head")
    assert (agree(base), agree(head)) == ("v1", "v2")
    assert head.fingerprint.model_runner_pinned == "v2"
    measured = [c for c in base.cells + head.cells if c.phase in ("drain", "sweep")]
    if servers == "persistent":
        assert measured == []  # refused before the first cell
    else:
        assert not head.cells  # the head server was refused before it measured
    assert "V2 model runner" in (out / "head" / ("block1/server.log" if servers == "persistent"
                                                  else "round1/server.log")).read_text() \
        .replace("Using V2 Model Runner", "V2 model runner")


def test_two_servers_on_the_same_runner_are_measured_and_judged(tmp_path):
    """No calibration here: the block is measured and judged by the test itself, which from
    nothing decides nothing in one block short of a gross effect (inconclusive, exit 3)."""
    proc, out = ab(tmp_path, env={"GATE_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == EXIT_INCONCLUSIVE, proc.stdout + proc.stderr
    assert "learns this runner's noise from its own blocks" in proc.stderr
    base, head = load_results(out / "base"), load_results(out / "head")
    assert agree(base) == agree(head) == "v1"
    assert base.fingerprint.model_runner_line.startswith("Model Runner V2 requires Triton")
    # cpu-smoke's rounds measure what a judged check reads (ab.cells: judged): at c=2 the
    # guided TPOT; the guided/free checks start at c=8, so no free cell
    assert [c.key.label for c in head.cells] == ["sweep guided c=2 r1", "sweep guided c=2 r2"]
    assert all(c.machine is not None for c in head.cells)  # the runner, read per cell


def test_gate_run_records_the_served_runner_and_the_doctor_agrees(tmp_path):
    out = tmp_path / "run"
    proc = gate_subprocess("run", "--plan", str(fake_plan(tmp_path)), "--out", str(out),
                    "--model-runner", "v2", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = load_results(out)
    assert agree(results) == "v2" and results.fingerprint.model_runner_pinned == "v2"
    assert results.plan.server.env["VLLM_USE_V2_MODEL_RUNNER"] == "1"
    assert "V2 model runner (server log)" in proc.stdout
    assert json.loads((out / "results.json").read_text())["fingerprint"]["model_runner"] == "v2"


def test_a_runner_too_noisy_for_the_thresholds_is_measured_and_told_what_helps(tmp_path):
    """A complete calibration (10 blocks) whose spread no design of 60 blocks decides the
    thresholds with: the A/B is not refused, it runs the plan's blocks (false fails are
    bounded whatever the noise) and says, before and after, what the noise allows."""
    path = fake_plan(tmp_path)
    plan = load_plan(str(path))
    fp = take_fingerprint(python=sys.executable, env={**os.environ, **plan.server.env})
    probe = make_results([cell("sweep", "guided", 2, 0, tpot_p50=10.0)], plan=plan, fp=fp)
    every = tuple(s.name for s in planned_slots(plan, plan.thresholds))
    store_for(tmp_path / "cache" / "noise", probe, names=every, between=0.6, within=0.6)
    out = tmp_path / "ab"
    proc = gate_subprocess("ab", "--plan", str(path), "--out", str(out), "--profile", "never",
                           "--noise-dir", str(tmp_path / "none"),
                           env={"GATE_CACHE_DIR": str(tmp_path / "cache")}, timeout=300)
    assert proc.returncode == EXIT_INCONCLUSIVE, proc.stdout + proc.stderr
    before = proc.stderr[:proc.stderr.index("starting vllm serve")]
    assert "note: at this runner's calibrated noise" in before
    assert "lower the runner's noise" in before and "Traceback" not in proc.stderr
    assert len({c.repeat for c in load_results(out / "head").cells}) == 2  # the plan's block
    verdict = load_verdict(out / "verdict.json")
    assert any("at this runner's calibrated noise" in n for n in verdict.notes)


def test_from_nothing_a_doubled_step_fails_in_the_first_block(tmp_path):
    """No calibration, a head whose every step takes twice as long: the first block's look
    for gross effects fails it when the block ends (exit 1)."""
    proc, out = ab(tmp_path, "--head-env", "FAKE_VLLM_STEP_MS=8",
                   env={"GATE_CACHE_DIR": str(tmp_path / "cache")}, max_rounds=8)
    assert proc.returncode == EXIT_FAIL, proc.stdout + proc.stderr
    verdict = load_verdict(out / "verdict.json")
    tpot = next(c for c in verdict.checks if c.name == "sweep.c2.tpot_p50_ms")
    assert tpot.outcome is Outcome.FAIL and tpot.decided_at_round == 2 and tpot.interval_is_range
    assert verdict.rounds == 2


def test_from_nothing_an_aa_is_judged_by_its_own_blocks_and_never_fails(tmp_path):
    """No calibration, the same build on both sides: from the second block on the t test
    looks at the run's own spread (the stand-in's timing noise follows the machine's load, so
    whether it passes within four blocks is the unit tests' to say, with seeded noise)."""
    proc, out = ab(tmp_path, env={"GATE_CACHE_DIR": str(tmp_path / "cache")}, max_rounds=8)
    assert proc.returncode in (0, EXIT_INCONCLUSIVE), proc.stdout + proc.stderr
    verdict = load_verdict(out / "verdict.json")
    tpot = next(c for c in verdict.checks if c.name == "sweep.c2.tpot_p50_ms")
    assert tpot.outcome is not Outcome.FAIL and verdict.rounds >= 4
    assert "t " in tpot.interval_source and "no calibration" in tpot.interval_source
    assert any(c.name == "spread.sweep.c2.tpot_p50_ms" for c in verdict.checks)


def test_from_nothing_the_budget_holds_by_the_blocks_measured_so_far(tmp_path):
    """No calibration gives a block's cost: the A/B's own first block does, and the next block
    is not started when it would end past the budget."""
    proc, out = ab(tmp_path, "--budget-minutes", "0.05",
                   env={"GATE_CACHE_DIR": str(tmp_path / "cache")}, max_rounds=8)
    assert proc.returncode == EXIT_INCONCLUSIVE, proc.stdout + proc.stderr
    assert "another block (about" in proc.stderr and "would not fit" in proc.stderr
    assert load_verdict(out / "verdict.json").rounds == 2
