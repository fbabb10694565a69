"""The model-runner rule on the CPU, through real `gate ab` and `gate run` processes and the
stand-in server (tests/support/fake_vllm.py: it reads VLLM_USE_V2_MODEL_RUNNER as vLLM does
and logs the lines of the runner that would serve, as vLLM's own logs name it).

- an A/B whose two servers report different runners is refused before any cell is measured:
  an `error` verdict naming both runners, in both server modes;
- one whose servers report the same runner is measured and judged;
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

from gate.core.errors import EXIT_ERROR, EXIT_UNDECIDED
from gate.judge.checks import planned_slots
from gate.judge.verdict import Outcome, load_verdict
from gate.measure.results import load_results
from gate.plan.spec import load_plan
from gate.runner.fingerprint import take_fingerprint


def ab(tmp_path: Path, *extra: str, servers: str = "persistent"):
    out = tmp_path / "ab"
    proc = gate_subprocess("ab", "--plan", str(fake_plan(tmp_path, servers)), "--out", str(out),
                    "--profile", "never", *extra, timeout=300)
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
    """No calibration here: one screening block is measured and judged (no gross effect,
    so it ends in "calibrate first", exit 5, not in an error)."""
    proc, out = ab(tmp_path)
    assert proc.returncode == EXIT_UNDECIDED, proc.stdout + proc.stderr
    assert "UNDECIDED: screened one block: no gross slowdown" in proc.stdout
    assert load_verdict(out / "verdict.json").outcome == Outcome.UNDECIDED
    base, head = load_results(out / "base"), load_results(out / "head")
    assert agree(base) == agree(head) == "v1"
    assert base.fingerprint.model_runner_line.startswith("Model Runner V2 requires Triton")
    assert [c.key.label for c in head.cells] == ["sweep guided c=2 r1", "sweep free c=2 r1",
                                                 "sweep free c=2 r2", "sweep guided c=2 r2"]


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


def test_a_runner_too_noisy_for_the_thresholds_still_screens_for_gross_effects(tmp_path):
    """A complete calibration (10 blocks) whose spread no design of 20 blocks can decide
    the thresholds with (measured so on a 2-core runner class): the A/B must not be blind
    there. It screens one block for gross effects, as a runner without a calibration does,
    and ends (no gross effect here) naming why nothing finer can be decided."""
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
    assert proc.returncode == EXIT_UNDECIDED, proc.stdout + proc.stderr
    assert "design: screening: this runner's calibration cannot decide the thresholds" \
        in proc.stderr
    assert "UNDECIDED: screened one block: no gross slowdown" in proc.stdout
    assert "need a plan this runner can decide" in proc.stdout
    assert "lengthen the cells" in proc.stdout and "Traceback" not in proc.stderr
    verdict = load_verdict(out / "verdict.json")
    assert verdict.outcome == Outcome.UNDECIDED and "lengthen the cells" in verdict.decide_with
    # said before the block is spent too, not only after it
    before = proc.stderr[:proc.stderr.index("starting vllm serve")]
    assert "before screening:" in before and "lengthen the cells" in before
    assert len({c.repeat for c in load_results(out / "head").cells}) == 2  # one block
