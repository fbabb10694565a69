"""Runner trust, where behaviour is at stake: the shipped workflows' `run:` scripts run the way
the runner runs them (`bash --noprofile --norc -eo pipefail`, with GITHUB_OUTPUT,
GITHUB_EVENT_PATH and the step's `env:` resolved from an event payload) against the fake GitHub
server of support/fake_github.py, and the `gate trust` commands run as real subprocesses.
unit/test_workflows_trust_static.py reads the same workflows for what their YAML alone decides.
"""

from __future__ import annotations

import base64
import os
import shutil
import sys
from pathlib import Path

import pytest
from support.action_runner import (
    PR_EVENT,
    Runner,
    ab_inputs,
    runner_env,
)
from support.action_runner import TOKEN as ACTION_TOKEN
from support.cli import gate_subprocess
from support.fake_github import TOKEN, FakeGitHub
from support.gitrepo import git, init, origin_and_clone, recording_shims
from support.paths import REPO_ROOT
from support.workflow_steps import (
    LABEL,
    REPO,
    SHA_A,
    SHA_B,
    gate_cli,
    pr_event,
    run_step,
)
from support.workflows import (
    PR_WORKFLOWS,
    WORKFLOWS,
    gate_checkouts,
    is_checkout,
    load,
    needs,
    self_hosted_jobs,
)


@pytest.fixture
def fake():
    with FakeGitHub(REPO) as server:
        server.good_tokens.add(TOKEN)
        yield server


# == 2. approval per commit ===============================================================
@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
@pytest.mark.parametrize(
    ("event", "run", "revoke", "environment"),
    [
        (pr_event("labeled", label=LABEL, labels=(LABEL,)), "true", "false", "perf-gate-fork"),
        (
            pr_event("synchronize", head_sha=SHA_B, labels=(LABEL,)),
            "false",
            "true",
            "perf-gate-fork",
        ),
        (pr_event("reopened", labels=(LABEL,)), "false", "true", "perf-gate-fork"),
        (pr_event("opened"), "false", "false", "perf-gate-fork"),
        (
            pr_event("labeled", label="documentation", labels=(LABEL, "documentation")),
            "false",
            "false",
            "perf-gate-fork",
        ),
        (pr_event("synchronize", fork=False), "true", "false", "perf-gate"),
        (pr_event("synchronize", fork=False, labels=(LABEL,)), "true", "true", "perf-gate"),
        (pr_event("edited", labels=(LABEL,)), "false", "false", "perf-gate-fork"),
    ],
    ids=[
        "fork-labelled",
        "fork-push-after-label",
        "fork-reopened-with-label",
        "fork-opened",
        "fork-other-label",
        "branch-push",
        "branch-push-with-label",
        "fork-edited",
    ],
)
def test_decide_runs_a_fork_only_for_the_labelled_commit(
    workflow, event, run, revoke, environment, tmp_path
):
    proc, out = run_step(load(workflow), "decide", "Decide from the event", tmp_path, event=event)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out["run"] == run
    assert out["revoke"] == revoke
    assert out["environment"] == environment
    assert out["sha"] == event["pull_request"]["head"]["sha"]
    # every fork run is preceded by the check that its environment has reviewers
    assert (
        out["check-environment"] == str(run == "true" and environment == "perf-gate-fork").lower()
    )


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
def test_decide_treats_a_deleted_fork_as_a_fork(workflow, tmp_path):
    event = pr_event("labeled", label=LABEL)
    event["pull_request"]["head"]["repo"] = None
    _, out = run_step(load(workflow), "decide", "Decide from the event", tmp_path, event=event)
    assert out["environment"] == "perf-gate-fork" and out["check-environment"] == "true"


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
def test_decide_refuses_to_run_from_the_prs_own_workflow_file(workflow, tmp_path):
    """Copied under `pull_request`, the decision would be the PR's to make: refuse."""
    proc, out = run_step(
        load(workflow),
        "decide",
        "Decide from the event",
        tmp_path,
        event_name="pull_request",
        event=pr_event("labeled", label=LABEL),
    )
    assert proc.returncode == 1
    assert "must run on pull_request_target" in proc.stdout
    assert "run" not in out


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
def test_a_push_after_approval_runs_nothing_until_labelled_again(workflow, fake, tmp_path):
    """label (commit A) -> run A; push B -> no run, label removed on GitHub; label again ->
    run B. The GPU job checks out decide's SHA, never a branch."""
    doc = load(workflow)
    fake.labels[7] = [LABEL, "documentation"]

    def decide(event: dict) -> dict:
        proc, out = run_step(doc, "decide", "Decide from the event", tmp_path, event=event)
        assert proc.returncode == 0, proc.stderr
        return out

    first = decide(pr_event("labeled", label=LABEL, labels=(LABEL,), head_sha=SHA_A))
    assert (first["run"], first["sha"]) == ("true", SHA_A)

    pushed = decide(pr_event("synchronize", labels=(LABEL,), head_sha=SHA_B))
    assert (pushed["run"], pushed["revoke"]) == ("false", "true")
    assert doc["jobs"]["revoke"]["if"] == "needs.decide.outputs.revoke == 'true'"
    proc, _ = run_step(
        doc,
        "revoke",
        "Remove the approval label",
        tmp_path,
        event=pr_event("synchronize", labels=(LABEL,), head_sha=SHA_B),
        fake=fake,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert fake.labels[7] == ["documentation"]
    (delete,) = fake.requests_to("DELETE")
    assert delete.path == f"/repos/{REPO}/issues/7/labels/{LABEL}"
    assert delete.headers["authorization"] == f"Bearer {TOKEN}"

    again = decide(pr_event("labeled", label=LABEL, labels=(LABEL,), head_sha=SHA_B))
    assert (again["run"], again["sha"]) == ("true", SHA_B)
    for job in self_hosted_jobs(doc).values():
        (code,) = [
            s
            for s in job["steps"]
            if is_checkout(s)
            and "repository" not in s["with"]
            and "sparse-checkout" not in s["with"]
        ]
        assert code["with"]["ref"] == "${{ needs.decide.outputs.sha }}"


def test_revoke_label_tolerates_a_label_already_gone(fake):
    fake.labels[7] = ["documentation"]
    proc = gate_subprocess("trust", "revoke-label", "--pr", "7", "--label", LABEL,
                           env=fake.job_env())
    assert proc.returncode == 0, proc.stderr
    assert "was not on the PR" in proc.stdout


def test_revoke_label_fails_without_permission(fake):
    fake.labels[7] = [LABEL]
    proc = gate_subprocess("trust", "revoke-label", "--pr", "7", "--label", LABEL,
                           env=fake.job_env("fork-token"))
    assert proc.returncode == 4
    assert proc.stderr.startswith("gate: error: ") and "Traceback" not in proc.stderr
    assert fake.labels[7] == [LABEL]


# == 2b. the approval environment must have reviewers: fail closed ========================
REVIEWERS_RULE = {
    "id": 1,
    "type": "required_reviewers",
    "prevent_self_review": True,
    "reviewers": [{"type": "Team", "reviewer": {"slug": "perf-maintainers"}}],
}


def environment(*rules: dict, bypass: bool = False) -> dict:
    return {
        "id": 9,
        "name": "perf-gate-fork",
        "can_admins_bypass": bypass,
        "protection_rules": list(rules),
    }


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
def test_fork_run_stops_when_the_environment_has_no_reviewers(workflow, fake, tmp_path):
    doc = load(workflow)
    name = "Check that the fork environment requires a reviewer"
    event = pr_event("labeled", label=LABEL)

    fake.environments["perf-gate-fork"] = environment(REVIEWERS_RULE)
    proc, _ = run_step(doc, "decide", name, tmp_path, event=event, fake=fake)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "requires approval by one of 1 reviewer(s)" in proc.stdout
    (get,) = fake.requests_to("GET", "/environments/")
    assert get.path == f"/repos/{REPO}/environments/perf-gate-fork"

    fake.environments["perf-gate-fork"] = environment(
        {"id": 2, "type": "wait_timer", "wait_timer": 5}
    )
    proc, _ = run_step(doc, "decide", name, tmp_path, event=event, fake=fake)
    assert proc.returncode == 1
    assert "has no required reviewers" in proc.stderr and "refusing to run" in proc.stderr
    # decide fails, so the GPU job (which needs decide) never starts
    assert all("decide" in needs(job) for job in self_hosted_jobs(doc).values())


@pytest.mark.parametrize(
    ("answer", "code", "message"),
    [
        (environment(REVIEWERS_RULE), 0, "requires approval by one of 1 reviewer(s)"),
        (environment(dict(REVIEWERS_RULE, reviewers=[])), 1, "has no required reviewers"),
        (environment(), 1, "has no required reviewers"),
        (None, 1, "does not exist"),
        ({"name": ["not", "a", "name"]}, 4, "is not an environment"),
    ],
    ids=["reviewers", "empty-reviewers", "no-rules", "missing", "malformed"],
)
def test_check_environment_passes_only_with_required_reviewers(answer, code, message, fake):
    if answer is not None:
        fake.environments["perf-gate-fork"] = answer
    proc = gate_subprocess("trust", "check-environment", "perf-gate-fork", env=fake.job_env())
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert message in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_check_environment_fails_closed_when_it_cannot_tell(fake):
    fake.environments["perf-gate-fork"] = environment(REVIEWERS_RULE)
    fake.fail_next(403, message="Resource not accessible by integration")
    proc = gate_subprocess("trust", "check-environment", "perf-gate-fork", env=fake.job_env())
    assert proc.returncode == 4
    assert "actions: read" in proc.stderr and "Failing closed" in proc.stderr


def test_check_environment_refuses_self_review_and_admin_bypass(fake):
    """One person must not both label (or dispatch) and approve a run: self-review refused,
    and an administrator who may bypass the reviewers is one person alone (review L3)."""
    fake.environments["perf-gate-fork"] = environment(
        dict(REVIEWERS_RULE, prevent_self_review=False))
    proc = gate_cli("trust", "check-environment", "perf-gate-fork", fake=fake)
    assert proc.returncode == 1 and "Prevent self-review" in proc.stderr
    fake.environments["perf-gate-fork"] = environment(REVIEWERS_RULE, bypass=True)
    proc = gate_cli("trust", "check-environment", "perf-gate-fork", fake=fake)
    assert proc.returncode == 1 and "Allow administrators to bypass" in proc.stderr


@pytest.mark.parametrize(
    ("workflow", "job", "step_name", "needs_or_inputs"),
    [
        ("gate-pr.yml", "measure", "Confirm the checkout is the approved commit", "needs"),
        ("gate-matrix.yml", "measure", "Confirm the checkout is the approved commit", "needs"),
        ("gate-rerun.yml", "measure", "Confirm the checkout is the requested commit", "inputs"),
    ],
)
def test_the_gpu_job_stops_when_the_checkout_is_not_the_approved_commit(
    workflow, job, step_name, needs_or_inputs, tmp_path
):
    repo = init(tmp_path / "repo")
    git(repo, "commit", "-q", "--allow-empty", "-m", "x")
    head = git(repo, "rev-parse", "HEAD")
    for sha, code in [(head, 0), (SHA_B, 1)]:
        given = (
            {"needs_outputs": {"decide": {"sha": sha}}}
            if needs_or_inputs == "needs"
            else {"inputs": {"sha": sha}}
        )
        proc, _ = run_step(load(workflow), job, step_name, tmp_path, cwd=repo, **given)
        assert proc.returncode == code, proc.stdout + proc.stderr
    assert f"checked out {head}, not the" in proc.stdout


def test_rerun_fails_before_the_gpu_when_the_pr_head_moved(fake, tmp_path):
    doc = load("gate-rerun.yml")
    name = "Check that the PR's head is still the requested commit"
    fake.pulls[7] = {"number": 7, "head": {"sha": SHA_B}}
    given = {"event_name": "workflow_dispatch", "fake": fake}

    proc, _ = run_step(doc, "check", name, tmp_path, inputs={"pr": "7", "sha": SHA_A}, **given)
    assert proc.returncode == 1
    assert f"PR #7's head is {SHA_B}, not the requested commit {SHA_A}" in proc.stderr
    assert "moved" in proc.stderr

    proc, _ = run_step(doc, "check", name, tmp_path, inputs={"pr": "7", "sha": SHA_B}, **given)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gets = fake.requests_to("GET", "/pulls/7")
    assert len(gets) == 2 and gets[0].headers["authorization"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize(
    ("sha", "pr", "plan", "code"),
    [
        (SHA_A, "7", "a100-gemma4-26b-pr", 0),
        (SHA_A, "", "cpu-smoke", 0),
        ("main", "7", "a100-gemma4-26b-pr", 2),
        ("refs/pull/7/head", "", "a100-gemma4-26b-pr", 2),
        (SHA_A.upper(), "7", "a100-gemma4-26b-pr", 2),
        (SHA_A[:12], "7", "a100-gemma4-26b-pr", 2),
        (SHA_A, "7; true", "a100-gemma4-26b-pr", 2),
        (SHA_A, "7", "gate-out/p.yaml", 2),  # a plan file from the workspace (review H1)
        (SHA_A, "7", "../plans/evil", 2),
        (SHA_A, "7", "", 2),
    ],
)
def test_rerun_inputs_are_checked(sha, pr, plan, code, tmp_path):
    proc, _ = run_step(
        load("gate-rerun.yml"),
        "check",
        "Check the inputs",
        tmp_path,
        event_name="workflow_dispatch",
        inputs={"sha": sha, "pr": pr, "plan": plan},
    )
    assert proc.returncode == code, proc.stdout + proc.stderr


def test_check_head_rejects_a_short_sha(fake):
    proc = gate_subprocess("trust", "check-head", "--pr", "7", "--sha", "abc123",
                           env=fake.job_env())
    assert proc.returncode == 2
    assert "not a full 40-character" in proc.stderr
    assert not fake.requests


# == 4. tokens: publish only when commenting, none on command lines, the gate pinned ======
@pytest.mark.parametrize("comment", ["false", "true"])
def test_action_passes_the_token_only_to_a_commenting_publish(comment, tmp_path, workspace):
    """Every `gate` the action runs is logged with whether GITHUB_TOKEN reached it."""
    with FakeGitHub() as fake:
        fake.good_tokens.add(ACTION_TOKEN)
        shims = tmp_path / "shims"
        shims.mkdir()
        log = tmp_path / "gate-calls.log"
        real = shutil.which("gate", path=str(Path(sys.executable).parent))
        (shims / "gate").write_text(
            "#!/usr/bin/env bash\n"
            f'printf "%s token=%s\\n" "${{1:-}}" "${{GITHUB_TOKEN:+set}}" >> {log}\n'
            f'exec {real} "$@"\n'
        )
        (shims / "gate").chmod(0o755)
        env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
        env["PATH"] = f"{shims}{os.pathsep}{env['PATH']}"
        env["PYTHONPATH"] = str(REPO_ROOT)
        inputs = ab_inputs(tmp_path, "healthy", comment=comment)
        result = Runner(workspace, inputs, env).run()
    assert result.outputs["verdict"] == "pass"
    calls = dict(line.split(" token=") for line in log.read_text().splitlines())
    assert calls.pop("publish") == ("set" if comment == "true" else "")
    assert calls and set(calls.values()) == {""}, calls  # compare, hunks, report: never
    assert bool(fake.comments.get(7)) == (comment == "true")


PIN_CASES = [
    ("main", 1),
    ("v1.2.0", 1),
    (SHA_A[:7], 1),
    (SHA_A.upper(), 1),
    (SHA_A + "\n" + SHA_B, 1),
    ("", 1),
    (SHA_A, 0),
]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_the_pin_check_fails_unless_gate_ref_is_a_full_sha(path, tmp_path):
    doc = load(path)
    checked = 0
    for name, job in doc["jobs"].items():
        for s in job["steps"]:
            if s.get("name") != "Check that the gate is pinned to a commit":
                continue
            for ref, code in PIN_CASES:
                proc, _ = run_step(doc, name, s["name"], tmp_path, extra_env={"GATE_REF": ref})
                assert proc.returncode == code, (name, ref, proc.stdout)
                if code:
                    assert "GATE_REF must be a full 40-character commit SHA" in proc.stdout
            checked += 1
    assert checked == sum(len(gate_checkouts(job)) for job in doc["jobs"].values())


def test_nightly_push_keeps_the_token_off_command_lines_and_uses_the_server_url(tmp_path):
    """Run the nightly's push step with real git against a local bare origin; a shim in
    front of git and gh records every command line (what /proc/PID/cmdline shows)."""
    token = "ghs_NightlySecret_abcdefghijklmnop"
    encoded = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    origin, work = origin_and_clone(tmp_path)
    baselines = work / ".github/perf-gate-baselines"
    baselines.mkdir(parents=True)
    (baselines / "a100.yaml").write_text("drain_throughput: 233\n")

    log = tmp_path / "argv.log"
    shims = recording_shims(
        tmp_path / "shims", log, {"git": shutil.which("git") or "git", "gh": "/bin/true"},
        extra=(f'if [ "${{1:-}}" = push ]; then echo "config=$GIT_CONFIG_KEY_0" >> {log}; fi\n'
               f'if [ "$TOOL" = gh ]; then echo "gh-host=$GH_HOST" >> {log}; fi'))

    doc = load("gate-nightly-baseline.yml")
    proc, _ = run_step(
        doc,
        "update",
        "Push a branch and open a PR",
        tmp_path,
        event_name="schedule",
        event={"repository": {"default_branch": "main"}},
        cwd=work,
        extra_env={
            "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
            "GITHUB_SERVER_URL": "https://ghe.example.test",
            "GH_TOKEN": token,
        },
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert git(origin, "branch", "--list", "perf-gate/baselines-77").endswith("baselines-77")
    text = log.read_text()
    assert token not in text and encoded not in text
    assert "config=http.https://ghe.example.test/.extraheader" in text
    assert "gh-host=ghe.example.test" in text
    assert "github.com" not in text


# == 6. bisect: the refs are checked before the GPU runner and on it ======================
@pytest.mark.parametrize(
    ("good", "bad", "issue", "plan", "code"),
    [
        (SHA_A, SHA_B, "", "a100-gemma4-26b-pr", 0),
        (SHA_A, SHA_B, "12", "a100-gemma4-26b", 0),
        (SHA_A, SHA_A, "", "a100-gemma4-26b-pr", 2),
        ("main", SHA_B, "", "a100-gemma4-26b-pr", 2),
        (SHA_A, SHA_B[:12], "", "a100-gemma4-26b-pr", 2),
        (SHA_A, SHA_B.upper(), "", "a100-gemma4-26b-pr", 2),
        (SHA_A, f"{SHA_B}; true", "", "a100-gemma4-26b-pr", 2),
        (SHA_A, SHA_B, "12; true", "a100-gemma4-26b-pr", 2),
        (SHA_A, SHA_B, "", "gate-bisect/p.yaml", 2),  # the review's H1: a plan from the artifact
        (SHA_A, SHA_B, "", "/tmp/p.yaml", 2),
    ],
)
def test_bisect_inputs_are_checked(good, bad, issue, plan, code, tmp_path):
    proc, _ = run_step(load("gate-bisect.yml"), "check", "Check the inputs", tmp_path,
                       event_name="workflow_dispatch",
                       inputs={"good": good, "bad": bad, "issue": issue, "plan": plan})
    assert proc.returncode == code, proc.stdout + proc.stderr


def test_bisect_refuses_a_ref_that_is_not_on_the_default_branch(fake, tmp_path):
    doc = load("gate-bisect.yml")
    name = "Check that both refs are commits of the default branch"
    fake.branches = {"main": [SHA_A, "c" * 40]}
    fake.elsewhere = {SHA_B}
    given = {"event_name": "workflow_dispatch", "fake": fake}
    proc, _ = run_step(doc, "check", name, tmp_path, inputs={"good": SHA_A, "bad": "c" * 40},
                       **given)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc, _ = run_step(doc, "check", name, tmp_path, inputs={"good": SHA_A, "bad": SHA_B},
                       **given)
    assert proc.returncode == 1
    assert f"{SHA_B} is not a commit of the default branch main" in proc.stderr
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in fake.requests)


def test_the_bisect_job_stops_unless_it_checked_out_good_and_bad_descends_from_it(tmp_path):
    repo = init(tmp_path / "repo")
    git(repo, "commit", "-q", "--allow-empty", "-m", "good")
    good = git(repo, "rev-parse", "HEAD")
    git(repo, "commit", "-q", "--allow-empty", "-m", "bad")
    bad = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "--detach", good)
    doc, name = load("gate-bisect.yml"), "Confirm the checkout is the requested commit"
    cases = [(good, bad, 0, ""), (bad, good, 1, f"checked out {good}, not the requested"),
             (good, SHA_B, 1, "is not in the fetched history")]
    for g, b, code, said in cases:
        proc, _ = run_step(doc, "bisect", name, tmp_path, cwd=repo, inputs={"good": g, "bad": b})
        assert proc.returncode == code, proc.stdout + proc.stderr
        assert said in proc.stdout
    git(repo, "checkout", "-q", "--detach", bad)
    proc, _ = run_step(doc, "bisect", name, tmp_path, cwd=repo, inputs={"good": bad, "bad": good})
    assert proc.returncode == 1 and "is not an ancestor of the bad commit" in proc.stdout
