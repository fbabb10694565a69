"""Who and what reaches a GPU runner outside the PR path (security review round three, H1,
M4, L2, L7), with the shipped workflows' own scripts run like the runner runs them and
`gate trust` / `gate publish` against the fake GitHub server:

- gate-bisect.yml runs only as itself, dispatched on the default branch: a fork's workflow
  that calls it (the review's exploit) is refused in `check`, before any GPU job exists; so
  does gate-acknowledge.yml, before it reads or writes the history;
- a rerun runs only on its sandbox branch, whose Actions cache no default-branch workflow
  restores;
- the gate commit every workflow pins must be on the gate's default branch (the
  acknowledgement's included);
- a re-run attempt of a bisect takes back the two state files of the attempt before, and
  nothing else of the artifact (no plan file, no package, no symlink);
- the bisect's issue comment is rendered from the typed bisect.json by the hash-pinned gate,
  never the bisect.md that the job running vLLM code wrote.
"""

from __future__ import annotations

import json

import pytest
from support.expressions import evaluate_if
from support.fake_github import FakeGitHub
from support.workflow_steps import REPO, SHA_A, SHA_B, TOKEN, run_step
from support.workflows import load, step

from gate.evidence.bisect_record import BisectOutcome, BisectResult, CommitInfo, StepRecord
from gate.evidence.bisection import StepVerdict

CALLER_STEP = "Check that this run is the default branch's own dispatch"
GATE_REF_STEP = "Check that the gate commit is on the gate's default branch"
OWN_BISECT = f"{REPO}/.github/workflows/gate-bisect.yml@refs/heads/main"
FORK_CALLER = "mallory/vllm/.github/workflows/x.yml@refs/pull/7/merge"


@pytest.fixture
def fake():
    with FakeGitHub(REPO) as server:
        server.good_tokens.add(TOKEN)
        yield server


def run_env(event_name: str, ref: str, workflow_ref: str) -> dict[str, str]:
    return {"GITHUB_EVENT_NAME": event_name, "GITHUB_REF": ref,
            "GITHUB_WORKFLOW_REF": workflow_ref}


# == H1: the bisect runs as itself, from the default branch ===============================
@pytest.mark.parametrize(("event", "ref", "workflow_ref", "code"), [
    ("workflow_dispatch", "refs/heads/main", OWN_BISECT, 0),
    # the review's exploit: a fork's pull_request workflow calling gate-bisect.yml@main
    ("pull_request", "refs/pull/7/merge", FORK_CALLER, 1),
    # a writer's branch workflow calling it, or dispatching a branch's copy of it
    ("workflow_dispatch", "refs/heads/main", f"{REPO}/.github/workflows/x.yml@refs/heads/main", 1),
    ("workflow_dispatch", "refs/heads/wip",
     f"{REPO}/.github/workflows/gate-bisect.yml@refs/heads/wip", 1),
], ids=["own-dispatch", "a-forks-caller", "another-workflow-calls-it", "a-branchs-copy"])
def test_the_bisect_runs_only_as_its_own_dispatch_on_the_default_branch(
    fake, tmp_path, event, ref, workflow_ref, code
):
    proc, _ = run_step(load("gate-bisect.yml"), "check", CALLER_STEP, tmp_path,
                       event_name=event, fake=fake, extra_env=run_env(event, ref, workflow_ref))
    assert proc.returncode == code, proc.stdout + proc.stderr
    if code:
        assert "gate: error: " in proc.stderr and "Traceback" not in proc.stderr


OWN_ACK = f"{REPO}/.github/workflows/gate-acknowledge.yml@refs/heads/main"


@pytest.mark.parametrize(("event", "ref", "workflow_ref", "code"), [
    ("workflow_dispatch", "refs/heads/main", OWN_ACK, 0),
    ("workflow_dispatch", "refs/heads/wip",
     f"{REPO}/.github/workflows/gate-acknowledge.yml@refs/heads/wip", 1),
    ("workflow_dispatch", "refs/heads/main", f"{REPO}/.github/workflows/x.yml@refs/heads/main", 1),
    ("pull_request", "refs/pull/7/merge", FORK_CALLER, 1),
], ids=["own-dispatch", "a-branchs-copy", "another-workflow-calls-it", "a-forks-caller"])
def test_an_acknowledgement_runs_only_as_its_own_dispatch_on_the_default_branch(
    fake, tmp_path, event, ref, workflow_ref, code
):
    """N4: the job that writes the history with `contents: write` checks who started it, as
    the bisect does, before it fetches or pushes anything."""
    doc = load("gate-acknowledge.yml")
    proc, _ = run_step(doc, "acknowledge", CALLER_STEP, tmp_path, event_name=event, fake=fake,
                       extra_env=run_env(event, ref, workflow_ref))
    assert proc.returncode == code, proc.stdout + proc.stderr
    names = [s.get("name") for s in doc["jobs"]["acknowledge"]["steps"]]
    assert names.index(CALLER_STEP) < names.index(GATE_REF_STEP) < names.index(
        "Fetch the history")


def test_a_rerun_runs_only_on_its_sandbox_branch(fake, tmp_path):
    """M4: dispatched on perf-gate/sandbox, the run's runtime token can write only that
    branch's Actions cache, which no workflow of the default branch restores."""
    doc = load("gate-rerun.yml")
    name = "Check that this run is a dispatch on the sandbox branch"
    own = f"{REPO}/.github/workflows/gate-rerun.yml@refs/heads/perf-gate/sandbox"
    proc, _ = run_step(doc, "check", name, tmp_path, event_name="workflow_dispatch", fake=fake,
                       extra_env=run_env("workflow_dispatch", "refs/heads/perf-gate/sandbox", own))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    on_main = f"{REPO}/.github/workflows/gate-rerun.yml@refs/heads/main"
    proc, _ = run_step(doc, "check", name, tmp_path, event_name="workflow_dispatch", fake=fake,
                       extra_env=run_env("workflow_dispatch", "refs/heads/main", on_main))
    assert proc.returncode == 1 and "not refs/heads/perf-gate/sandbox" in proc.stderr


# == L7: the pinned gate commit is the gate's =============================================
@pytest.mark.parametrize(("workflow", "job"), [
    ("gate-pr.yml", "decide"), ("gate-matrix.yml", "decide"), ("gate-rerun.yml", "check"),
    ("gate-bisect.yml", "check"), ("gate-nightly-baseline.yml", "check"),
    ("gate-calibrate.yml", "check"), ("gate-acknowledge.yml", "acknowledge")])
def test_every_workflow_checks_its_gate_commit_against_the_gates_default_branch(
    fake, tmp_path, workflow, job
):
    doc = load(workflow)
    pinned = doc["env"]["GATE_REF"]
    gate_repo = doc["env"]["GATE_REPOSITORY"]
    fake.others[gate_repo] = {"default_branch": "main", "branches": {"main": [SHA_B, pinned]}}
    proc, _ = run_step(doc, job, GATE_REF_STEP, tmp_path, fake=fake)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fake.others[gate_repo]["branches"] = {"main": [SHA_B]}  # an impostor: only in a fork
    proc, _ = run_step(doc, job, GATE_REF_STEP, tmp_path, fake=fake)
    assert proc.returncode == 1 and f"{pinned} is not a commit of this repository" in proc.stderr


# == H1: a re-run attempt takes the state files, nothing else ============================
def test_the_state_of_the_attempt_before_is_restored_on_a_re_run_only():
    restore = step(load("gate-bisect.yml"), "bisect", "Restore the state of a cancelled attempt")
    for attempt, restored in (("1", False), ("2", True)):
        assert evaluate_if(restore["if"], {"github": {"run_attempt": attempt}}) is restored


def test_only_the_two_state_files_of_the_artifact_are_taken(tmp_path):
    restored = tmp_path / "restored"
    (restored / "evil" / "vllm").mkdir(parents=True)
    (restored / "evil" / "vllm" / "__init__.py").write_text("import os; os.system('id')\n")
    (restored / "p.yaml").write_text("server: {launch: command}\n")
    (restored / "bisect-state.json").write_text('{"state": 1}')
    (tmp_path / "elsewhere.json").write_text("{}")
    (restored / "hunks-state.json").symlink_to(tmp_path / "elsewhere.json")
    work = tmp_path / "work"
    work.mkdir()
    proc, _ = run_step(load("gate-bisect.yml"), "bisect", "Take the restored state files only",
                       tmp_path, cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in (work / "gate-bisect").iterdir()) == ["bisect-state.json"]
    assert not (work / "gate-bisect" / "bisect-state.json").is_symlink()


# == L2: the issue comment is the gate's rendering of bisect.json ========================
EVIL = "@mallory </details><img src=x onerror=alert(1)> ``` | cell\r::error::x"


def bisect_result() -> BisectResult:
    step = StepRecord(number=1, commit=SHA_B, role="endpoints", verdict=StepVerdict.BAD,
                      subject=EVIL, reason=EVIL)
    return BisectResult(outcome=BisectOutcome.FOUND, headline=f"found {EVIL}", repo="/r",
                        good=CommitInfo(sha=SHA_A, subject="good"),
                        bad=CommitInfo(sha=SHA_B, subject=EVIL),
                        first_bad=CommitInfo(sha=SHA_B, subject=EVIL), steps=[step])


def test_the_report_job_posts_the_rendered_result_not_the_bisect_md(fake, tmp_path):
    report = tmp_path / "report"
    report.mkdir()
    (report / "bisect.json").write_text(bisect_result().model_dump_json())
    (report / "bisect.md").write_text("@everyone click http://evil.example\n")
    proc, _ = run_step(load("gate-bisect.yml"), "report", "Post the report", tmp_path,
                       event_name="workflow_dispatch", fake=fake, inputs={"issue": "12"},
                       cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (comment,) = fake.comments[12]
    body = comment["body"]
    assert "evil.example" not in body and "@everyone" not in body
    assert "@mallory" not in body and "<img" not in body and "\r" not in body
    assert SHA_B in body


def test_a_forged_result_is_refused_and_nothing_is_posted(fake, tmp_path):
    report = tmp_path / "report"
    report.mkdir()
    data = json.loads(bisect_result().model_dump_json())
    data["first_bad"]["sha"] = "</code>@mallory"  # not a commit: refused, never rendered
    (report / "bisect.json").write_text(json.dumps(data))
    proc, _ = run_step(load("gate-bisect.yml"), "report", "Post the report", tmp_path,
                       event_name="workflow_dispatch", fake=fake, inputs={"issue": "12"},
                       cwd=tmp_path)
    assert proc.returncode == 2 and "first_bad.sha" in proc.stderr
    assert not fake.comments
