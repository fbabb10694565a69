"""Pairs the gate does not measure, through real `gate run` and `gate ab` processes on the
stand-in server (support/fake_vllm.py):

- a plan the build refuses (issue 26, item 7): vLLM's own configuration check stops the server
  at start-up with a ValueError (the stand-in's FAKE_VLLM_REFUSE, e.g. "Model Runner V2 does
  not yet support: ..."); the first error line says "this build refuses the plan: <vLLM's
  reason>", and the A/B's headline names the build that refused, never a traceback of the
  gate's own;
- two different builds (two virtualenvs, their own interpreters) that import one and the same
  vllm folder (issue 26, item 1): the A/B would be an A/A, so it is an error naming both
  builds and the folder, before any server starts.
"""

from __future__ import annotations

import os
import sysconfig
import venv

from support.cli import gate_subprocess
from support.fake_plan import fake_plan
from support.fake_vllm import REFUSE
from support.paths import FAKE_VLLM

from gate.core.errors import EXIT_ERROR
from gate.judge.verdict import Outcome, load_verdict
from gate.measure.results import load_results

REASON = "Model Runner V2 does not yet support: speculative decoding (ngram)"


def test_gate_run_says_the_build_refuses_the_plan(tmp_path):
    out = tmp_path / "run"
    proc = gate_subprocess("run", "--plan", fake_plan(tmp_path), "--out", out,
                           env={REFUSE: REASON}, timeout=300)
    assert proc.returncode == EXIT_ERROR, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr  # the server's traceback is in its log, not ours
    results = load_results(out)
    assert results.status == "error"
    assert results.errors[0].startswith(
        f"this build refuses the plan: {REASON} (vllm serve exited with code 1); last lines of ")
    errors = proc.stdout.split("MEASUREMENT ERRORS:\n", 1)[1]
    assert errors.splitlines()[0].startswith(f"  - this build refuses the plan: {REASON} (")


def test_gate_ab_names_the_build_that_refuses_the_plan_first(tmp_path):
    out = tmp_path / "ab"
    proc = gate_subprocess("ab", "--plan", fake_plan(tmp_path), "--out", out, "--profile",
                           "never", "--head-env", f"{REFUSE}={REASON}",
                           env={"GATE_CACHE_DIR": str(tmp_path / "cache")}, timeout=300)
    assert proc.returncode == EXIT_ERROR, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    verdict = load_verdict(out / "verdict.json")
    assert verdict.outcome is Outcome.ERROR
    assert verdict.headline.startswith(f"ERROR: the head build refuses the plan: {REASON} "
                                       "(vllm serve exited with code 1)"), verdict.headline
    assert "died" not in verdict.headline and "\n" not in verdict.headline
    assert verdict.errors[0].startswith(f"head run error: this build refuses the plan: {REASON}")
    assert proc.stdout.lstrip().startswith(verdict.headline)
    # vLLM's own lines are kept for the reader, in the error and the server's log
    assert f"Value error, {REASON}" in verdict.errors[0]
    assert f"Value error, {REASON}" in (out / "head" / "block1" / "server.log").read_text()


def virtualenv(folder):
    """A virtualenv of its own (its own prefix and interpreter) that finds this interpreter's
    packages (the gate's dependencies: the stand-in's server needs aiohttp) through a .pth."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    (site,) = (folder / "lib").glob("python3*/site-packages")
    (site / "tests-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder / "bin" / "python"


def test_two_builds_that_import_one_vllm_folder_are_an_error_naming_both(tmp_path):
    """Each virtualenv is a build of its own, but the plan puts the stand-in package first on
    both servers' PYTHONPATH: both import it, so the A/B would measure one build twice."""
    base, head = virtualenv(tmp_path / "venv-base"), virtualenv(tmp_path / "venv-head")
    out = tmp_path / "ab"
    proc = gate_subprocess("ab", "--plan", fake_plan(tmp_path), "--base", tmp_path / "venv-base",
                           "--head", tmp_path / "venv-head", "--out", out, "--profile", "never",
                           env={"GATE_CACHE_DIR": str(tmp_path / "cache")}, timeout=300)
    assert proc.returncode == EXIT_ERROR, proc.stdout[-3000:] + proc.stderr[-2000:]
    verdict = load_verdict(out / "verdict.json")
    assert verdict.outcome is Outcome.ERROR
    folder = str(FAKE_VLLM / "vllm")
    same = [e for e in verdict.errors if "different builds but both import" in e]
    assert same, verdict.errors
    assert f"the base ({base}) and the head ({head})" in same[0]
    assert f"import vllm from {folder}: the A/B would measure one build twice" in same[0]
    assert f"the base ({base}) and the head ({head})" in verdict.headline  # its first line
    for label, python in (("base", base), ("head", head)):
        origin = load_results(out / label).fingerprint.vllm_origin
        assert origin is not None and origin.path == folder
        assert origin.prefix == os.path.dirname(os.path.dirname(python))  # two builds
    assert not list(out.rglob("server.log"))  # refused before any server
