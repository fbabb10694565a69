"""Who may send a commit to a GPU runner, with the shipped workflows' own scripts run like the
runner runs them and `gate trust` against the fake GitHub server (docs/security.md, "How
approval flows"):

- a bot's branch of the repository (Dependabot, an app) or a bot's push to a person's branch
  goes the approval path, like a fork (issue 16, item 3);
- the approval label approves only the commit its labeller approved in a review: a push
  between the review and the label approves nothing (item 2);
- a manual rerun waits for a second person in the approval environment (item 1);
- round three (security review M1, L3): the no-approval path is a writer's own push only,
  checked with GitHub (`gate trust check-writer`): an outsider's PR from an existing branch
  of the repository, a bot-prefixed branch or a reopened PR goes the approval path, and a
  labeller without write access approves nothing.
"""

from __future__ import annotations

import pytest
from support.expressions import Evaluator
from support.fake_github import FakeGitHub
from support.workflow_steps import (
    DEPENDABOT,
    LABEL,
    MAINTAINER,
    REPO,
    SHA_A,
    SHA_B,
    TOKEN,
    gate_cli,
    pr_event,
    run_step,
)
from support.workflows import PR_WORKFLOWS, load

DECIDE = "Decide from the event"
REVIEW_STEP = "Check that the labeller approved this commit"
PRE_COMMIT_CI = {"login": "pre-commit-ci[bot]", "type": "Bot"}
REVIEWERS_RULE = {"id": 1, "type": "required_reviewers", "prevent_self_review": True,
                  "reviewers": [{"type": "Team", "reviewer": {"slug": "perf-maintainers"}}]}


WRITERS_STEP = "Check that the author and the pusher may write to the repository"
OUTSIDER = {"login": "mallory", "type": "User"}


@pytest.fixture
def fake():
    with FakeGitHub(REPO) as server:
        server.good_tokens.add(TOKEN)
        server.permissions.update({"alice": "write", MAINTAINER["login"]: "maintain"})
        yield server


def decided(workflow: str, event: dict, tmp_path, fake: FakeGitHub) -> dict[str, str]:
    """decide's job outputs as GitHub computes them, after its writer check ran (when its
    `if:` holds) against the fake."""
    doc = load(workflow)
    out = decide(workflow, event, tmp_path)
    steps = {"decide": {"outputs": out}}
    if out["check-writers"] == "true":
        proc, writers = run_step(doc, "decide", WRITERS_STEP, tmp_path, event=event, fake=fake,
                                 steps_outputs={"decide": out})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        steps["writers"] = {"outputs": writers}
    outputs = doc["jobs"]["decide"]["outputs"]
    return {k: Evaluator({"steps": steps}).interpolate(v) for k, v in outputs.items()}


def decide(workflow: str, event: dict, tmp_path) -> dict[str, str]:
    proc, out = run_step(load(workflow), "decide", DECIDE, tmp_path, event=event)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


# == item 3: bots go the approval path ====================================================
@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
@pytest.mark.parametrize(
    "event",
    [
        pr_event("opened", fork=False, author=DEPENDABOT),
        pr_event("synchronize", fork=False, author=DEPENDABOT),
        pr_event("reopened", fork=False, author=DEPENDABOT),
        pr_event("synchronize", fork=False, sender=PRE_COMMIT_CI),  # a bot pushed to alice's branch
        pr_event("synchronize", fork=False, author={"login": "octo-org", "type": "Organization"}),
    ],
    ids=["dependabot-opened", "dependabot-push", "dependabot-reopened", "bot-push-to-person",
         "organization-author"],
)
def test_a_bots_commit_on_a_branch_of_the_repository_does_not_run_unapproved(
    workflow, event, tmp_path
):
    out = decide(workflow, event, tmp_path)
    assert (out["run"], out["environment"]) == ("false", "perf-gate-fork")


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
@pytest.mark.parametrize("action", ["opened", "synchronize"])
def test_a_writer_pushing_their_own_branch_runs_without_a_label(workflow, action, tmp_path,
                                                                 fake):
    out = decided(workflow, pr_event(action, fork=False), tmp_path, fake)
    assert (out["run"], out["environment"]) == ("true", "perf-gate")
    asked = {r.path.split("/")[-2] for r in fake.requests_to("GET", "/permission")}
    assert asked == {"alice"}  # the author, who is also the pusher here


# == round three: the no-approval path is for writers only ================================
@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
@pytest.mark.parametrize(("author", "sender"), [(OUTSIDER, OUTSIDER), (OUTSIDER, {"login": "alice", "type": "User"}),
                                                ({"login": "alice", "type": "User"}, OUTSIDER)],
                         ids=["outsider-opens", "writer-pushes-to-outsiders-pr",
                              "outsider-pushes"])
def test_someone_without_write_access_on_a_branch_of_the_repository_needs_approval(
    workflow, author, sender, tmp_path, fake
):
    """The attack (M1): anyone opens `main <- dependabot-like or a maintainer's WIP branch`;
    the event names them as author and sender, users, head in this repository."""
    event = pr_event("synchronize", fork=False, author=author, sender=sender)
    out = decided(workflow, event, tmp_path, fake)
    assert out["run"] == "false"
    assert "has no write access" in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
@pytest.mark.parametrize("branch", ["dependabot/pip/requirements/common/torch-9.9",
                                    "renovate/numpy-2.x", "copilot/fix-bitmask",
                                    "gh-readonly-queue/main/pr-7-abc", "perf-gate/calibration-5"])
def test_a_bots_branch_goes_the_approval_path_whoever_opened_it(workflow, branch, tmp_path,
                                                                  fake):
    out = decided(workflow, pr_event("opened", fork=False, head_ref=branch), tmp_path, fake)
    assert (out["run"], out["environment"]) == ("false", "perf-gate-fork")
    assert not fake.requests  # nothing to ask: the approval path


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
def test_a_reopened_pr_does_not_run_unapproved(workflow, tmp_path, fake):
    """A reopened PR's head may be a bot's last push; only a review and the label run it."""
    out = decided(workflow, pr_event("reopened", fork=False), tmp_path, fake)
    assert (out["run"], out["environment"]) == ("false", "perf-gate-fork")


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
def test_the_writer_check_fails_closed_when_github_cannot_tell(workflow, tmp_path, fake):
    event = pr_event("synchronize", fork=False)
    out = decide(workflow, event, tmp_path)
    fake.fail_next(403, message="Resource not accessible by integration")
    proc, writers = run_step(load(workflow), "decide", WRITERS_STEP, tmp_path, event=event,
                             fake=fake, steps_outputs={"decide": out})
    assert proc.returncode == 4 and "Failing closed" in proc.stderr
    assert "run" not in writers  # decide fails: no GPU job


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
def test_a_labeller_without_write_access_approves_nothing(workflow, tmp_path, fake):
    """L3: someone with triage can add labels and submit an approving review; neither makes
    them a maintainer."""
    fake.permissions["triager"] = "triage"
    fake.add_review(7, "triager", "APPROVED", SHA_A)
    event = pr_event("labeled", label=LABEL, labels=(LABEL,),
                     sender={"login": "triager", "type": "User"})
    out = decide(workflow, event, tmp_path)
    proc, review = run_step(load(workflow), "decide", REVIEW_STEP, tmp_path, event=event,
                            fake=fake, steps_outputs={"decide": out})
    assert proc.returncode == 1 and "@triager has 'read' permission (role triage)" in proc.stderr
    assert "review-url" not in review


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
def test_a_bots_pr_runs_after_the_approval_path(workflow, tmp_path):
    """Labelled by a maintainer: run, in the fork environment, after the review check."""
    event = pr_event("labeled", fork=False, author=DEPENDABOT, label=LABEL, labels=(LABEL,))
    out = decide(workflow, event, tmp_path)
    assert (out["run"], out["environment"], out["check-environment"]) == (
        "true", "perf-gate-fork", "true")
    assert out["reviewer"] == MAINTAINER["login"] and out["sha"] == SHA_A


# == item 2: the label approves the reviewed commit only ==================================
def review_step(workflow: str, tmp_path, fake: FakeGitHub, head_sha: str):
    event = pr_event("labeled", label=LABEL, labels=(LABEL,), head_sha=head_sha)
    out = decide(workflow, event, tmp_path)
    return run_step(load(workflow), "decide", REVIEW_STEP, tmp_path, event=event, fake=fake,
                    steps_outputs={"decide": out})


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
def test_a_push_between_review_and_label_approves_nothing(workflow, fake, tmp_path):
    """The maintainer approved commit A; the fork pushed B; the label lands on B."""
    fake.add_review(7, MAINTAINER["login"], "APPROVED", SHA_A)
    proc, out = review_step(workflow, tmp_path, fake, head_sha=SHA_B)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"approved commit {SHA_A}, but the label landed on {SHA_B}" in proc.stderr
    assert "review-url" not in out
    (get,) = fake.requests_to("GET", "/reviews")
    assert get.path == f"/repos/{REPO}/pulls/7/reviews"
    assert get.headers["authorization"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
def test_the_label_runs_the_commit_its_labeller_approved(workflow, fake, tmp_path):
    review = fake.add_review(7, MAINTAINER["login"], "APPROVED", SHA_B)
    proc, out = review_step(workflow, tmp_path, fake, head_sha=SHA_B)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out["review-url"] == review["html_url"]  # the environment's URL: what was reviewed
    summary = (tmp_path / "summary.md").read_text()
    assert f"approved commit `{SHA_B}`" in summary and review["html_url"] in summary


@pytest.mark.parametrize(
    ("reviews", "message"),
    [
        ([], "has not approved PR #7"),
        ([("someone-else", "APPROVED", SHA_A)], "has not approved PR #7"),
        ([("maintainer", "COMMENTED", SHA_A)], "has not approved PR #7"),
        ([("maintainer", "APPROVED", SHA_A), ("maintainer", "CHANGES_REQUESTED", SHA_A)],
         "latest review of PR #7 is CHANGES_REQUESTED"),
        ([("maintainer", "DISMISSED", SHA_A)], "latest review of PR #7 is DISMISSED"),
        ([("maintainer", "APPROVED", SHA_B), ("maintainer", "COMMENTED", SHA_A)],
         f"approved commit {SHA_B}, but the label landed on {SHA_A}"),
    ],
    ids=["none", "another-person", "comment-only", "changes-requested-later", "dismissed",
         "approved-an-older-commit"],
)
def test_check_review_refuses(reviews, message, fake):
    for login, state, sha in reviews:
        fake.add_review(7, login, state, sha)
    proc = gate_cli("trust", "check-review", "--pr", "7", "--sha", SHA_A, "--reviewer",
                    "maintainer", fake=fake)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_check_review_reads_every_page_and_matches_logins_as_github_does(fake):
    for i in range(130):  # two pages: the approval is on the second
        fake.add_review(7, f"reviewer{i}", "COMMENTED", SHA_B)
    fake.add_review(7, "Maintainer", "APPROVED", SHA_A)
    proc = gate_cli("trust", "check-review", "--pr", "7", "--sha", SHA_A, "--reviewer",
                    "maintainer", fake=fake)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(fake.requests_to("GET", "/reviews")) == 2


def test_check_review_fails_closed_when_it_cannot_read_reviews(fake):
    fake.add_review(7, "maintainer", "APPROVED", SHA_A)
    fake.fail_next(403, message="Resource not accessible by integration")
    proc = gate_cli("trust", "check-review", "--pr", "7", "--sha", SHA_A, "--reviewer",
                    "maintainer", fake=fake)
    assert proc.returncode == 4
    assert "pull-requests: read" in proc.stderr and "Failing closed" in proc.stderr


def test_check_review_rejects_a_short_sha(fake):
    proc = gate_cli("trust", "check-review", "--pr", "7", "--sha", "abc", "--reviewer", "m",
                    fake=fake)
    assert proc.returncode == 2 and not fake.requests


# == item 1: a rerun waits for a second person ============================================
def test_a_rerun_stops_before_the_gpu_without_a_reviewed_environment(fake, tmp_path):
    doc = load("gate-rerun.yml")
    name = "Check that the approval environment requires a reviewer"
    given = {"event_name": "workflow_dispatch", "fake": fake, "inputs": {"sha": SHA_A}}
    proc, _ = run_step(doc, "check", name, tmp_path, **given)
    assert proc.returncode == 1 and "does not exist" in proc.stderr  # GitHub would create it open
    fake.environments["perf-gate-fork"] = {"name": "perf-gate-fork", "protection_rules": [
        {"id": 2, "type": "wait_timer", "wait_timer": 5}]}
    proc, _ = run_step(doc, "check", name, tmp_path, **given)
    assert proc.returncode == 1 and "has no required reviewers" in proc.stderr
    fake.environments["perf-gate-fork"]["protection_rules"] = [REVIEWERS_RULE]
    proc, _ = run_step(doc, "check", name, tmp_path, **given)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert doc["jobs"]["measure"]["environment"] == "perf-gate-fork"
