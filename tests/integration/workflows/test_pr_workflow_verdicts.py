"""The shipped PR and rerun workflows, job by job as the runner lays them out
(support/workflow_job.py), against the local GitHub server and stand-in vLLM servers
(support/fake_vllm.py, launched as vLLM is):

- an undecided A/B (a runner with no calibration screens one block, nothing gross) of a change
  to a watched hot path never leaves a green check: the measuring job fails and the comment
  says undecided and what would decide;
- the same A/B of a change outside the hot paths is not held up (a notice, not a failure);
- a rerun of a commit whose test was decided keeps that verdict (nothing is measured again),
  and one whose test can go on continues it: same design, same rounds spent, said in the
  comment.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest
from support import vllm_helpers
from support.calibrations import store_for
from support.factories import cell, check, make_results
from support.fake_github import TOKEN
from support.gitrepo import commit, git, init
from support.paths import REPO_ROOT
from support.workflow_job import JobRun, Run
from support.workflows import load

from gate.flows.ab_state import STATE_FILE, ABState, BuildIdentity, FixedDesign
from gate.history.model import Acknowledgement
from gate.history.store import opened
from gate.judge.acknowledge import Acknowledgement as Ack
from gate.judge.acknowledge import apply_acknowledgements
from gate.judge.checks import planned_slots
from gate.judge.noise import runner_key
from gate.judge.verdict import Check, Outcome, Verdict, save_verdict
from gate.measure.results import save_results
from gate.plan.spec import load_plan
from gate.runner.fingerprint import take_fingerprint

UTILS = "vllm/v1/structured_output/utils.py"
PR = 7
# The hash-pinned installs of the gate in the token jobs: the gate under test is on PATH here
# (tests/integration/workflows/test_token_job_installs.py checks those installs).
INSTALLS = {"Install the gate (hash-pinned, no token)"}


def stand_in_plan(folder: Path, **ab) -> Path:
    """The stand-in server (launched as vLLM is), one sweep level, no drain; cpu-smoke's null
    thresholds stay null, and the stand-in's TTFT (a few milliseconds of event loop, which a
    loaded runner can move by half) is not judged here."""
    thresholds = {**load_plan("cpu-smoke").thresholds.model_dump(mode="json"),
                  "ttft_p50_pct": None, "ttft_tail_pct": None, "ttft_wait_pct": None}
    path, _ = vllm_helpers.stand_in_plan(folder, **{
        "warmup": {"requests": 2, "concurrency": 2}, "drain.enabled": False,
        "sweep.levels": [2], "sweep.window_s": 0.5, "sweep.max_window_s": 5,
        "sweep.min_requests_factor": 2, "thresholds": thresholds,
        "ab": {"servers": "persistent", "max_rounds": 4, **ab}})
    return path


def pr_repo(path: Path, changed: str) -> tuple[str, str]:
    """A vLLM-shaped repository: main, and a PR commit that changes `changed`."""
    init(path)
    base = commit(path, "base", {UTILS: "def apply_grammar_bitmask():\n    pass\n",
                                 "docs/usage.md": "usage\n"})
    git(path, "update-ref", "refs/remotes/origin/main", base)
    git(path, "checkout", "-q", "-b", "pr")
    head = commit(path, "the PR", {changed: "def apply_grammar_bitmask():\n    stage()\n"})
    return base, head


def checkout_of(repo: Path, noise: Path | None = None, history: Path | None = None):
    """actions/checkout as the test's repository has it; the base branch's baselines are
    empty, or `noise` (the reviewed calibrations of this runner class); the data branch holds
    `history`, or is not there yet (no night recorded: the checkout fails)."""
    def checkout(folder: Path, with_: dict[str, str]) -> bool | None:
        if with_.get("ref") == "perf-gate-data":
            if history is None:
                return False
            shutil.copy(history, folder / "history.sqlite")
            return None
        if with_.get("repository"):  # the gate itself: the action runs from this checkout
            return None
        if with_.get("sparse-checkout"):  # the base branch's baselines
            stored = folder / with_["sparse-checkout"] / "noise"
            stored.mkdir(parents=True, exist_ok=True)
            if noise is not None:
                shutil.copytree(noise, stored, dirs_exist_ok=True)
            return None
        git(repo, "clone", "-q", str(repo), str(folder))
        git(folder, "checkout", "-q", with_["ref"])
        git(folder, "update-ref", "refs/remotes/origin/main",
            git(repo, "rev-parse", "refs/remotes/origin/main"))
        return None
    return checkout


def workflow_run(tmp_path: Path, fake, name: str, repo: Path, plan: Path, *, event: dict,
                 inputs: dict | None = None) -> Run:
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO_ROOT), "HOME": os.environ.get("HOME", str(tmp_path)),
        "LANG": "C.UTF-8", "GATE_CACHE_DIR": str(tmp_path / "cache"),
        "GITHUB_API_URL": fake.url, "GITHUB_REPOSITORY": fake.repository,
        "GITHUB_SERVER_URL": "https://github.com", "GITHUB_RUN_ID": "4243",
        "GITHUB_EVENT_NAME": "pull_request_target" if name == "gate-pr.yml" else
        "workflow_dispatch", "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
    }
    (tmp_path / "event.json").write_text(json.dumps(event))
    return Run(with_plan_files(load(name)), tmp_path / "run", env, event=event,
               inputs=inputs or {},
               checkout=checkout_of(repo), skip=INSTALLS,
               action_inputs={"install-gate": "false", "install-mode": "preinstalled",
                              "python": sys.executable, "base-python": sys.executable,
                              "plan": str(plan),
                              # not a provisioned GPU runner (test_isolation covers the check)
                              "runner-marker": "none", "model-cache": ""})


def with_plan_files(doc: dict) -> dict:
    """The workflow as shipped, but for the one setting a CPU machine cannot keep: its GPU
    jobs take built-in plans only (GATE_BUILTIN_PLANS_ONLY: test_trusted_sources), and the
    plans that run here (a stand-in server, a shrunk plan) are files."""
    doc["env"]["GATE_BUILTIN_PLANS_ONLY"] = "false"
    return doc


def pr_event(head: str, base: str) -> dict:
    person = {"login": "alice", "type": "User"}
    return {"action": "synchronize", "number": PR, "sender": person,
            "pull_request": {"number": PR, "user": person, "labels": [],
                             "head": {"sha": head, "repo": {"full_name": "octo/vllm"}},
                             "base": {"sha": base, "repo": {"full_name": "octo/vllm"}}}}


def decided_to_run(head: str) -> JobRun:
    """The decide job's outputs for a person's own branch (its logic: test_approval_paths)."""
    return JobRun("decide", [], {"run": "true", "revoke": "false", "sha": head,
                                 "environment": "perf-gate", "review-url": ""})


def run_pr_workflow(tmp_path, fake, changed: str, *, undecided: bool = False):
    """The PR workflow's jobs on a stand-in A/A. One block (max-rounds 2) from nothing cannot
    decide (inconclusive); with a calibration whose block costs more than the budget the test
    cannot start (undecided)."""
    repo = tmp_path / "repo"
    base, head = pr_repo(repo, changed)
    fake.pulls[PR] = {"number": PR, "head": {"sha": head}, "state": "open"}
    plan = stand_in_plan(tmp_path)
    run = workflow_run(tmp_path, fake, "gate-pr.yml", repo, plan, event=pr_event(head, base))
    run.action_inputs["max-rounds"] = "2"
    if undecided:
        calibrate_runner(plan, tmp_path / "reviewed-noise")
        run.checkout = checkout_of(repo, tmp_path / "reviewed-noise")
        run.action_inputs["budget-minutes"] = "0.01"
    run.jobs["decide"] = decided_to_run(head)
    earlier = run.run("earlier")
    measure = run.run("measure")
    comment = run.run("comment")
    return earlier, measure, comment


def calibrate_runner(plan_path: Path, noise: Path) -> None:
    """A calibration of this runner for the plan (its spreads and a block's cost)."""
    plan = load_plan(str(plan_path))
    fp = take_fingerprint(python=sys.executable, env={**os.environ, **plan.server.env})
    probe = make_results([cell("sweep", "guided", 2, 0, tpot_p50=10.0)], plan=plan, fp=fp)
    every = tuple(s.name for s in planned_slots(plan, plan.thresholds))
    store_for(noise, probe, names=every, between=0.01, within=0.02)


@pytest.mark.parametrize("undecided", [False, True], ids=["inconclusive", "undecided"])
def test_an_ab_that_did_not_decide_a_hot_path_change_is_never_a_green_check(tmp_path, fake,
                                                                            undecided):
    earlier, measure, comment = run_pr_workflow(tmp_path, fake, UTILS, undecided=undecided)
    assert earlier.result == "success" and earlier.outputs["found"] == "false"
    gate = measure.step("gate")
    word = "undecided" if undecided else "inconclusive"
    assert gate.outputs["verdict"] == word, gate.stderr[-3000:]
    assert measure.result == "failure"  # the check a PR sees is red, not green
    assert f"::error title=Perf gate {word}::{word.upper()}:" in gate.stdout
    assert comment.result == "success"
    (posted,) = fake.comments[PR]
    assert f"{word.upper()}:" in posted["body"]
    if undecided:  # what would decide, in the comment
        assert "--budget-minutes" in posted["body"]


def test_an_ab_that_did_not_decide_a_change_outside_the_hot_paths_is_not_held_up(tmp_path,
                                                                                 fake):
    _, measure, comment = run_pr_workflow(tmp_path, fake, "docs/usage.md")
    gate = measure.step("gate")
    assert gate.outputs["verdict"] == "inconclusive" and measure.result == "success"
    assert "::notice title=Perf gate inconclusive::not failing: the change touches no " \
        "watched hot path" in gate.stdout
    assert comment.result == "success" and "INCONCLUSIVE" in fake.comments[PR][0]["body"]


def earlier_artifact(folder: Path, plan_path: Path, *, outcome: Outcome, finished: bool,
                     checks: tuple[Check, ...] = ()) -> bytes:
    """What a first run of this commit uploaded: both results, the state and the verdict."""
    plan = load_plan(str(plan_path))
    fp = take_fingerprint(python=sys.executable, env={**os.environ, **plan.server.env})
    for label in ("base", "head"):
        cells = [cell("sweep", arm, 2, r, tpot_p50=3.0) for r in range(2)
                 for arm in ("guided", "free")]
        res = make_results(cells, plan=plan.model_copy(update={"repeats": 2}), fp=fp,
                           label=label).model_copy(update={"sequential_rounds": 4})
        save_results(res, folder / label / "results.json")
    identity = BuildIdentity.of(sys.executable, {}, fp)
    state = ABState(plan=plan.name, plan_hash=plan.measurement_hash(), runner_key=runner_key(fp),
                    thresholds=plan.thresholds, builds={"base": identity, "head": identity},
                    design=FixedDesign(rounds_per_block=2, max_rounds=4, block_s=120.0,
                                       description="recorded design"),
                    rounds_done=2, finished=finished, outcome=outcome,
                    started_in="https://github.com/octo/vllm/actions/runs/1001")
    (folder / STATE_FILE).write_text(state.model_dump_json())
    save_verdict(Verdict(outcome=outcome, mode="ab", rounds=2, checks=list(checks),
                         headline=f"{outcome.value.upper()}: recorded"), folder / "verdict.json")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for path in folder.rglob("*"):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return buf.getvalue()


def run_rerun(tmp_path, fake, *, outcome: Outcome, finished: bool, checks=None, history=None):
    """The rerun workflow's jobs on a commit with an earlier test. `checks(head)`: the earlier
    verdict's checks; `history(head)`: the data branch's history file, or none yet."""
    repo = tmp_path / "repo"
    base, head = pr_repo(repo, UTILS)
    fake.pulls[PR] = {"number": PR, "head": {"sha": head}, "state": "open"}
    # the plan's budget holds no further block: a resumed test stops before measuring
    plan = stand_in_plan(tmp_path, budget_minutes=0.5)
    zipped = earlier_artifact(tmp_path / "first", plan, outcome=outcome, finished=finished,
                              checks=checks(head) if checks else ())
    # the PR workflow's run that measured `head`: its title (run-name) names the commit, its
    # head_sha is the default branch's (pull_request_target)
    fake.add_run("gate-pr.yml", f"perf-gate: PR #{PR} labeled at {head}",
                 {"perf-gate-results": zipped})
    run = workflow_run(tmp_path, fake, "gate-rerun.yml", repo, plan,
                       event={"inputs": {"sha": head, "pr": str(PR)}},
                       inputs={"sha": head, "pr": str(PR), "plan": str(plan), "repeats": "",
                               "mode": "ab"})
    run.checkout = checkout_of(repo, history=history(head) if history else None)
    run.jobs["check"] = JobRun("check", [], {})
    earlier = run.run("earlier")
    measure = run.run("measure")
    comment = run.run("comment")
    return earlier, measure, comment


def test_a_rerun_of_a_decided_commit_keeps_its_verdict_and_measures_nothing(tmp_path, fake):
    earlier, measure, comment = run_rerun(tmp_path, fake, outcome=Outcome.FAIL, finished=True)
    assert earlier.outputs["found"] == "true"
    gate = measure.step("Perf gate")
    assert gate.outputs["verdict"] == "fail" and measure.result == "failure"
    assert "starting vllm serve" not in gate.stderr  # nothing measured again
    body = fake.comments[PR][0]["body"]
    # (the run's URL is shown, not linked: the comment neutralises links in such text)
    assert "Rerun: this commit's test was decided (fail after 2 rounds) in " in body
    assert "/octo/vllm/actions/runs/1001: a rerun does not restart a decided test" in body


def test_a_rerun_continues_a_test_that_can_go_on(tmp_path, fake):
    earlier, measure, comment = run_rerun(tmp_path, fake, outcome=Outcome.INCONCLUSIVE,
                                          finished=False)
    gate = measure.step("Perf gate")
    assert gate.outputs["verdict"] == "inconclusive", gate.stderr[-3000:]
    assert measure.result == "failure"  # inconclusive on a hot-path change: not green
    state = ABState.model_validate_json(
        (tmp_path / "run" / "measure" / "gate-out" / STATE_FILE).read_text())
    assert state.rounds_done == 2 and state.design.description == "recorded design"
    assert state.started_in == "https://github.com/octo/vllm/actions/runs/1001"
    body = fake.comments[PR][0]["body"]
    assert "Rerun: continues the sequential test started in " in body
    assert "/octo/vllm/actions/runs/1001 after 2 rounds (same design" in body


SLOWER = check("sweep.c2.tpot_p50_ms", "TPOT p50 (guided, c=2)", 3.0, 4.5, Outcome.FAIL)


def acknowledged_at(tmp_path: Path, login: str = "maintainer", pr: int = PR):
    """The data branch's history with `login`'s acknowledgement of SLOWER at a head."""
    def history(head: str) -> Path:
        path = tmp_path / "data" / "history.sqlite"
        path.parent.mkdir(exist_ok=True)
        with opened(path, create=True) as store:
            store.acknowledge(Acknowledgement(
                repository="octo/vllm", pr=pr, head_sha=head, check=SLOWER.name,
                reason="pinned memory for correctness", login=login, permission="write",
                created_at="2026-01-02T00:00:00+00:00"))
        return path
    return history


def test_a_rerun_after_the_acknowledgement_turns_the_check_neutral(tmp_path, fake):
    """The PR's failing check, acknowledged for this head on the data branch: the rerun keeps
    the decided test, applies the acknowledgement, and the check a PR sees is green; the
    comment says who acknowledged it."""
    _, measure, comment = run_rerun(tmp_path, fake, outcome=Outcome.FAIL, finished=True,
                                    checks=lambda head: (SLOWER,),
                                    history=acknowledged_at(tmp_path))
    gate = measure.step("Perf gate")
    assert gate.outputs["verdict"] == "pass", gate.stderr[-3000:]
    assert measure.result == "success" and comment.result == "success"
    body = fake.comments[PR][0]["body"]
    assert "➖ neutral: acknowledged fail" in body and "intended slowdown acknowledged" in body
    assert "slowdown acknowledged by maintainer" in body


def test_an_acknowledgement_of_another_pr_leaves_the_check_red(tmp_path, fake):
    _, measure, comment = run_rerun(tmp_path, fake, outcome=Outcome.FAIL, finished=True,
                                    checks=lambda head: (SLOWER,),
                                    history=acknowledged_at(tmp_path, pr=8))
    assert measure.step("Perf gate").outputs["verdict"] == "fail"
    assert measure.result == "failure" and "neutral" not in fake.comments[PR][0]["body"]


def test_an_acknowledgement_the_measuring_job_made_up_is_never_posted(tmp_path, fake):
    """The earlier artifact (written where the code under test ran) claims an acknowledgement
    that the data branch does not hold: the measuring job's own check is its own word, as
    its measurement is, but the comment job posts nothing."""
    def forged(head: str) -> tuple[Check, ...]:
        claim = [Ack(check=SLOWER.name, login="maintainer",
                     reason="pinned memory for correctness", head_sha=head)]
        return tuple(apply_acknowledgements(
            Verdict(outcome=Outcome.FAIL, mode="ab", checks=[SLOWER], headline="FAIL"),
            claim, head).checks)

    _, measure, comment = run_rerun(tmp_path, fake, outcome=Outcome.FAIL, finished=True,
                                    checks=forged, history=acknowledged_at(tmp_path, pr=8))
    assert measure.step("Perf gate").outputs["verdict"] == "fail"  # the file's outcome
    assert comment.result == "failure" and not fake.comments.get(PR)
    assert "does not hold for PR #7" in comment.step("Post the comment").stderr


def test_the_shipped_pr_workflows_fail_on_undecided():
    for name in ("gate-pr.yml", "gate-rerun.yml"):
        (step,) = [s for job in load(name)["jobs"].values() for s in job["steps"]
                   if s.get("uses") == "./.gate"]
        assert {"undecided", "inconclusive", "fail", "error"} <= set(
            step["with"]["fail-on"].split(",")), name
        assert "continue-from" in step["with"], name
    assert TOKEN  # the fake accepts the job token these runs post with
