"""The gate started from a vLLM checkout measures the build it was given, not the checkout.

A PR job's working directory is the PR's vLLM checkout, and `python -c`/`python -m` put the
working directory first on sys.path: a base server started there imported the PR's `vllm/`
(every A/B an A/A). Here each command runs from a folder holding a decoy `vllm/` that raises
on import, and the build is the stand-in vLLM package (tests/fixtures/fake_vllm) on the plan's
own PYTHONPATH: `gate run`, `gate ab`, `gate calibrate` and `gate doctor` must each measure the
stand-in (its folder named in what they write), never import the decoy.
"""

from __future__ import annotations

import json
import sys

import pytest
from support.cli import gate_subprocess
from support.paths import FAKE_VLLM
from support.vllm_helpers import stand_in_plan

from gate.judge.verdict import Outcome, load_verdict
from gate.measure.results import load_results

DECOY_MESSAGE = "the decoy vllm of the working directory was imported"
INTENDED = str(FAKE_VLLM / "vllm")


@pytest.fixture
def decoy(tmp_path):
    folder = tmp_path / "vllm-checkout"
    (folder / "vllm").mkdir(parents=True)
    (folder / "vllm" / "__init__.py").write_text(f"raise ImportError({DECOY_MESSAGE!r})\n")
    return folder


def short_plan(tmp_path):
    plan, _ = stand_in_plan(tmp_path, **{
        "warmup": {"requests": 2, "concurrency": 2}, "drain.enabled": False,
        "sweep.levels": [2], "sweep.window_s": 0.5, "sweep.max_window_s": 5,
        "sweep.min_requests_factor": 2, "ab.max_rounds": 2})
    return plan


def gate_from(folder, *args, **kw):
    return gate_subprocess(*args, cwd=folder, timeout=300, **kw)


def test_gate_run_from_a_checkout_serves_the_build_it_was_given(tmp_path, decoy):
    proc = gate_from(decoy, "run", "--plan", short_plan(tmp_path), "--out", tmp_path / "run")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = load_results(tmp_path / "run")
    assert results.status == "complete" and results.fingerprint.vllm_origin.path == INTENDED
    logs = "".join(p.read_text() for p in (tmp_path / "run").rglob("server.log"))
    assert DECOY_MESSAGE not in logs + proc.stderr


def test_gate_ab_from_a_checkout_measures_both_builds_it_was_given(tmp_path, decoy):
    proc = gate_from(decoy, "ab", "--plan", short_plan(tmp_path), "--out", tmp_path / "ab",
                     "--profile", "never", env={"GATE_CACHE_DIR": str(tmp_path / "cache")})
    verdict = load_verdict(tmp_path / "ab" / "verdict.json")
    assert verdict.outcome != Outcome.ERROR, verdict.errors
    for label in ("base", "head"):
        assert load_results(tmp_path / "ab" / label).fingerprint.vllm_origin.path == INTENDED
    assert DECOY_MESSAGE not in proc.stderr


def test_gate_calibrate_from_a_checkout_calibrates_the_build_it_was_given(tmp_path, decoy):
    noise = tmp_path / "noise"
    proc = gate_from(decoy, "calibrate", "--plan", short_plan(tmp_path), "--blocks", "2",
                     "--noise-dir", noise, "--out", tmp_path / "cal",
                     env={"GATE_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert list(noise.glob("*.yaml")), "no calibration stored"
    measured = [load_results(p.parent) for p in (tmp_path / "cal").rglob("results.json")]
    assert measured and all(r.fingerprint.vllm_origin.path == INTENDED for r in measured)


def test_gate_doctor_from_a_checkout_examines_the_build_it_was_given(tmp_path, decoy):
    proc = gate_from(decoy, "doctor", "--python", sys.executable, "--json",
                     env={"PYTHONPATH": str(FAKE_VLLM)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["vllm_origin"]["path"] == INTENDED


def test_a_build_whose_vllm_comes_from_outside_it_is_an_error_naming_both(tmp_path, decoy):
    """vllm on a PYTHONPATH the job leaked, not one the build itself sets: refused."""
    plan = short_plan(tmp_path)
    text = plan.read_text().replace(f"PYTHONPATH: {FAKE_VLLM}", "PYTHONSAFEPATH: '1'")
    plan.write_text(text)
    gate_from(decoy, "ab", "--plan", plan, "--out", tmp_path / "ab", "--profile",
                     "never", env={"PYTHONPATH": str(FAKE_VLLM),
                                   "GATE_CACHE_DIR": str(tmp_path / "cache")})
    verdict = load_verdict(tmp_path / "ab" / "verdict.json")
    assert verdict.outcome == Outcome.ERROR
    assert any("outside the build" in e and INTENDED in e for e in verdict.errors), verdict.errors
    assert not list((tmp_path / "ab").rglob("server.log"))  # refused before any server
