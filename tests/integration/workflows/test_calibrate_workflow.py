"""workflows/gate-calibrate.yml's scripts, run as a runner runs them: the input check, the merge
of the measured runs into the stored calibrations with the real `gate calibrate --merge`
(a broken artifact writes nothing), and the push that keeps the token off command lines."""

from __future__ import annotations

import base64
import datetime as dt
import os
import shutil
import sys

import pytest
import yaml
from support.calibrations import calibration_run
from support.cli import gate_subprocess
from support.gitrepo import git, origin_and_clone, recording_shims
from support.workflow_steps import run_workflow_step
from support.workflows import load

from gate.judge.noise import CalibrationKey, load_calibration, store_run
from gate.judge.noise_guard import utc_today

DOC = load("gate-calibrate.yml")
TODAY = utc_today().isoformat()
EARLIER = (utc_today() - dt.timedelta(days=30)).isoformat()
KEY = CalibrationKey(plan="a100-gemma4-26b-pr", plan_hash="abc123",
                     runner_key="gpu: 1x NVIDIA A100-SXM4-80GB 81920 MiB; cpus 16; quota none")


def installed_gate(tmp_path) -> dict:
    """PATH with the step's `python -m pip install ./.gate` answered by this checkout: `gate`
    runs the gate under test, `python -m pip` does nothing."""
    shims = tmp_path / "bin"
    shims.mkdir(exist_ok=True)
    (shims / "gate").write_text(f'#!/usr/bin/env bash\nexec {sys.executable} -m gate.cli "$@"\n')
    (shims / "python").write_text(
        '#!/usr/bin/env bash\nif [ "$1 $2" = "-m pip" ]; then exit 0; fi\n'
        f'exec {sys.executable} "$@"\n')
    for shim in shims.iterdir():
        shim.chmod(0o755)
    return {"PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize(("blocks", "code"), [("", 0), ("4", 0), ("20", 0), ("1", 2),
                                              ("21", 2), ("4; rm -rf /", 2), ("x", 2)])
def test_the_block_count_is_checked_before_anything_runs(tmp_path, blocks, code):
    proc = run_workflow_step(DOC, "measure", "Check the inputs", tmp_path,
                             context={"inputs": {"blocks": blocks}})
    assert proc.returncode == code, proc.stdout + proc.stderr
    if code:
        assert "blocks must be a whole number from 2 to 20" in proc.stdout


def test_measured_runs_are_merged_into_the_stored_calibration(tmp_path):
    noise = tmp_path / ".github/perf-gate-baselines/noise"
    stored = store_run(noise, KEY, calibration_run(date=EARLIER))
    store_run(tmp_path / "calibrations/perf-gate-calibration-a100", KEY,
              calibration_run(date=TODAY))
    proc = run_workflow_step(DOC, "store", "Merge the runs into the stored calibrations", tmp_path,
                             extra_env=installed_gate(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cal = load_calibration(stored)
    assert [r.provenance.date for r in cal.runs] == [TODAY, EARLIER]
    assert len(list(noise.iterdir())) == 1


@pytest.mark.parametrize(("run", "said"), [
    (calibration_run(date=EARLIER), f"a run dated {EARLIER} is older than"),
    (calibration_run(between=0.09, date=TODAY), "more than chance moves it"),
], ids=["an-old-run-replayed", "a-spread-ten-times-wider"])
def test_the_merge_refuses_a_run_not_measured_for_it_or_one_that_moves_the_noise(
    tmp_path, run, said
):
    """Security review M3: a calibration PR carries the runs just measured, each within what
    chance moves the stored spread; the store job writes nothing otherwise."""
    noise = tmp_path / ".github/perf-gate-baselines/noise"
    stored = store_run(noise, KEY, calibration_run(date=EARLIER))
    before = stored.read_text()
    store_run(tmp_path / "calibrations/perf-gate-calibration-a100", KEY, run)
    proc = run_workflow_step(DOC, "store", "Merge the runs into the stored calibrations", tmp_path,
                             extra_env=installed_gate(tmp_path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said in proc.stderr and "nothing written" in proc.stderr
    assert "Traceback" not in proc.stderr and stored.read_text() == before


def test_a_maintainer_takes_a_moved_spread_with_accept_shift(tmp_path):
    noise = tmp_path / "noise"
    stored = store_run(noise, KEY, calibration_run(date=EARLIER))
    store_run(tmp_path / "runs", KEY, calibration_run(between=0.09, date=TODAY))
    proc = gate_subprocess("calibrate", "--merge", str(tmp_path / "runs"), "--noise-dir",
                           str(noise), "--accept-shift")
    assert proc.returncode == 0, proc.stderr
    assert "spread moved: " in proc.stderr
    assert [r.provenance.date for r in load_calibration(stored).runs] == [TODAY, EARLIER]


def test_a_broken_artifact_writes_nothing(tmp_path):
    noise = tmp_path / ".github/perf-gate-baselines/noise"
    stored = store_run(noise, KEY, calibration_run(date=EARLIER))
    before = stored.read_text()
    good = tmp_path / "calibrations/perf-gate-calibration-a100"
    store_run(good, KEY, calibration_run(date=TODAY))
    data = yaml.safe_load(next(good.iterdir()).read_text())
    data["runs"][0]["checks"]["drain.req_per_min"]["within_sd"] = -1
    (good / "broken.yaml").write_text(yaml.safe_dump(data))
    proc = run_workflow_step(DOC, "store", "Merge the runs into the stored calibrations", tmp_path,
                             extra_env=installed_gate(tmp_path))
    assert proc.returncode == 2 and "within_sd" in proc.stderr
    assert stored.read_text() == before


def test_the_push_keeps_the_token_off_command_lines(tmp_path):
    """With the app's token (the step's GH_TOKEN), on a schedule's event, which carries no
    `repository`: the PR's base is the run's own branch."""
    token = "ghs_CalibrationSecret_abcdefghijkl"
    encoded = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    origin, work = origin_and_clone(tmp_path)
    store_run(work / ".github/perf-gate-baselines/noise", KEY, calibration_run())
    log = tmp_path / "argv.log"
    shims = recording_shims(tmp_path / "shims", log, {"git": shutil.which("git") or "git",
                                                      "gh": "/bin/true"})
    proc = run_workflow_step(
        DOC, "store", "Push a branch and open a PR", work,
        context={"github": {"run_id": "77", "ref_name": "main", "event": {}},
                 "steps": {"app": {"outputs": {"token": token}}}},
        extra_env={"PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
                   "GITHUB_SERVER_URL": "https://ghe.example.test"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert git(origin, "branch", "--list", "perf-gate/calibration-77").endswith("calibration-77")
    text = log.read_text()
    assert token not in text and encoded not in text and "github.com" not in text
    assert "--base\x00main\x00--head\x00perf-gate/calibration-77" in text  # L9: a schedule's branch
    # nothing changed: no branch, no PR
    again = run_workflow_step(
        DOC, "store", "Push a branch and open a PR", work,
        context={"github": {"run_id": "78", "ref_name": "main", "event": {}},
                 "steps": {"app": {"outputs": {"token": token}}}},
        extra_env={"PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"})
    assert again.returncode == 0 and "calibrations unchanged" in again.stdout
