"""`gate bisect --hunks` as a user runs it, with real A/Bs on the stand-in server
(support/fake_vllm.py), over a git repository of the stand-in package
(support.vllm_bisect_repo.STAND_IN: three commits, the first adds host work to every engine
step with guided rows in five hunks, the second does not import, the third fixes it).

One bisect, cancelled with SIGTERM once the endpoints are confirmed and run again to the end:
it names the slow commit (two A/Bs: the endpoints and the slow commit, whose parent is the
good commit; the commit that does not import costs an import check, no server), then
delta-debugs that commit's five hunks against the good build, the profile diff of the slow
step ranking the slow hunk first: three server pairs in all (the endpoints, the slow commit,
the blamed hunk alone). There is no calibration for this plan, so each A/B screens for gross
slowdowns. Every build is a real overlay of the repository's files over the stand-in package
(docs/bisect.md#how-a-step-is-installed), served by the process the gate starts.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.cli import gate_command, gate_env, gate_subprocess
from support.paths import FAKE_VLLM, REPO_ROOT
from support.vllm_bisect_repo import (
    PLAN_CHANGES,
    SLOW_HUNK_MARK,
    STAND_IN,
    UTILS,
    build_repo,
)
from support.vllm_helpers import stand_in_plan, wait_gone

from gate.core.errors import EXIT_FAIL, EXIT_TERMINATED
from gate.evidence.bisect_record import BisectResult, BisectState, HunksResult

# The gate finds the installed build (the overlays' base) on its own PYTHONPATH.
ENV = {"PYTHONPATH": str(FAKE_VLLM)}
# The stand-in's slow step is over ten times its healthy one: one-second windows show it.
PROFILE_ARGS = ["--profile-windows", "2", "--profile-window", "1"]


@pytest.fixture(scope="module")
def bisected(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bisect")
    repo = build_repo(tmp, STAND_IN)
    plan, marker = stand_in_plan(tmp, **PLAN_CHANGES, **{
        "drain.window_s": 1, "server.env.FAKE_VLLM_GUIDED_STEP_MS": "1"})
    out = tmp / "out"
    args = ["bisect", "--repo", str(repo.path), "--good", repo.good, "--bad", repo.bad,
            "--hunks", "--plan", str(plan), "--out", str(out), *PROFILE_ARGS]
    cancelled = _cancel_after_endpoints(args, out / "bisect-state.json")
    assert wait_gone(marker) == [], "a server outlived the cancelled bisect"
    assert (out / "bisect-state.json").is_file(), cancelled.stderr[-3000:]
    state_then = BisectState.model_validate_json((out / "bisect-state.json").read_text())
    proc = gate_subprocess(*args, env=ENV, timeout=600)
    assert wait_gone(marker) == []
    return repo, out, cancelled, state_then, proc


def _cancel_after_endpoints(args: list[str], state: Path) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(gate_command(*args), cwd=REPO_ROOT, env=gate_env(ENV),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if state.is_file() and json.loads(state.read_text())["steps"]:
            proc.send_signal(signal.SIGTERM)
            break
        time.sleep(0.2)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_sigterm_stops_the_bisect_and_keeps_its_finished_steps(bisected):
    _, _, cancelled, state_then, _ = bisected
    assert cancelled.returncode == EXIT_TERMINATED, cancelled.stderr[-3000:]
    assert "terminated (SIGTERM)" in cancelled.stderr
    assert state_then.steps[0].role == "endpoints" and state_then.steps[0].verdict == "bad"


def test_the_rerun_goes_on_without_measuring_a_finished_step_again(bisected):
    _, out, _, state_then, proc = bisected
    assert proc.returncode == EXIT_FAIL, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = BisectResult.model_validate_json((out / "bisect.json").read_text())
    assert result.steps[:len(state_then.steps)] == state_then.steps
    measured = [s.commit for s in result.steps if s.outcome is not None or s.screened]
    assert len(measured) == len(set(measured))
    assert "bisect step 1 (endpoints)" not in proc.stderr


def test_the_slow_commit_is_named_within_ceil_log2_n_plus_1_steps(bisected):
    repo, out, _, _, _ = bisected
    result = BisectResult.model_validate_json((out / "bisect.json").read_text())
    assert result.first_bad.sha == repo.slow_sha, result.headline
    ab_steps = [s for s in result.steps if s.outcome is not None or s.screened]
    commits = len(repo.shas) - 1
    assert len(ab_steps) <= math.ceil(math.log2(commits)) + 1
    # the endpoints, then the slow commit; its parent is the good commit, measured with them
    assert [s.commit for s in ab_steps] == [repo.bad, repo.slow_sha]
    assert all(s.build.startswith("overlay of") for s in ab_steps)
    assert result.runner_seconds > sum(s.seconds for s in result.steps) > 0
    md = (out / "bisect.md").read_text()
    assert repo.slow_sha in md and "Runner time:" in md


def test_the_commit_that_does_not_import_is_skipped_not_blamed(bisected):
    repo, out, _, _, _ = bisected
    result = BisectResult.model_validate_json((out / "bisect.json").read_text())
    (step,) = [s for s in result.steps if s.commit == repo.shas[repo.broken]]
    assert step.verdict == "skipped" and step.outcome is None and not step.screened
    assert "request does not import: ImportError" in step.reason
    assert result.first_bad.sha != repo.shas[repo.broken]


def test_the_slow_hunk_ranks_first_by_the_profile_diff(bisected):
    _, out, _, _, _ = bisected
    result = BisectResult.model_validate_json((out / "bisect.json").read_text())
    top = result.hunks.hunks[0]
    assert top.path == UTILS and SLOW_HUNK_MARK in top.text, result.hunks_ranked_by
    assert result.hunks_ranked_by.startswith("the profile diff of step")


def test_hunks_names_the_one_slow_hunk_of_five(bisected):
    repo, out, _, _, _ = bisected
    result = HunksResult.model_validate_json((out / "hunks-bisect.json").read_text())
    assert len(result.hunks) == 5 and result.parent.sha == repo.good
    (only,) = result.minimal
    assert result.hunks[only].path == UTILS and SLOW_HUNK_MARK in result.hunks[only].text
    assert result.tests[0].build.startswith("the bisect's step")  # the whole change
    assert all(t.reproduces == (only in t.hunks) for t in result.tests)
    bisect = BisectResult.model_validate_json((out / "bisect.json").read_text())
    assert [h.text for h in bisect.smallest_hunks] == [result.hunks[only].text]
