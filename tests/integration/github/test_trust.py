"""gate.github.trust against the local GitHub server: each check fails closed. A setting the
trust model needs that is missing is a TrustError (exit 1); an answer GitHub did not give, or
gave in a shape the gate cannot read, is UnknownTrust (exit 4). The `gate trust` commands as
the workflows run them: integration/workflows/test_workflows_trust.py."""

from __future__ import annotations

import pytest
from support.fake_github import TOKEN

from gate.core.errors import EXIT_ERROR, EXIT_FAIL, GateError
from gate.core.settings import Settings
from gate.github.client import Clock, GitHubClient, GitHubForbidden, RetryPolicy
from gate.github.trust import (
    TrustError,
    UnknownTrust,
    check_caller,
    check_commit_sha,
    check_environment,
    check_head,
    check_writer,
    client_for,
    revoke_label,
)

SHA = "a" * 40
LABEL = "run-perf-gate"


def reviewers_rule(*logins: str, prevent_self_review: bool = True) -> dict:
    return {"type": "required_reviewers", "prevent_self_review": prevent_self_review,
            "reviewers": [{"type": "User", "reviewer": {"login": login}} for login in logins]}


@pytest.fixture
def client(fake, clock) -> GitHubClient:
    return GitHubClient(fake.url, fake.repository, TOKEN, clock=Clock(clock.sleep, clock.now),
                        retry=RetryPolicy(max_retries=1))


def test_the_two_failures_have_their_exit_codes():
    assert TrustError.exit_code == EXIT_FAIL and UnknownTrust.exit_code == EXIT_ERROR


# -- the fork environment --------------------------------------------------------------------
def test_an_environment_with_reviewers_is_described(fake, client):
    fake.environments["perf-gate-fork"] = {
        "name": "perf-gate-fork", "can_admins_bypass": False,
        "protection_rules": [{"type": "wait_timer", "wait_timer": 5},
                             reviewers_rule("alice", "bob", prevent_self_review=False),
                             reviewers_rule("carol")],
    }
    review = check_environment(client, "perf-gate-fork")
    assert (review.name, review.reviewers) == ("perf-gate-fork", 3)  # over every rule
    assert review.prevent_self_review and not review.can_admins_bypass


def test_an_environment_administrators_may_bypass_is_refused(fake, client):
    """Security review L3: with the bypass one administrator sends a commit alone."""
    fake.environments["perf-gate-fork"] = {"name": "perf-gate-fork", "can_admins_bypass": True,
                                           "protection_rules": [reviewers_rule("alice")]}
    with pytest.raises(TrustError, match="lets administrators bypass its reviewers"):
        check_environment(client, "perf-gate-fork")


@pytest.mark.parametrize("rules", [[], [{"type": "wait_timer", "wait_timer": 5}],
                                   [reviewers_rule()]], ids=["none", "timer-only", "empty"])
def test_an_environment_nobody_must_approve_is_refused(fake, client, rules):
    fake.environments["perf-gate-fork"] = {"name": "perf-gate-fork", "protection_rules": rules}
    with pytest.raises(TrustError, match="has no required reviewers"):
        check_environment(client, "perf-gate-fork")


def test_a_missing_environment_is_refused_since_a_job_would_create_it_open(client):
    with pytest.raises(TrustError, match="'perf-gate-fork' does not exist .* without reviewers"):
        check_environment(client, "perf-gate-fork")


def test_an_environment_the_token_may_not_read_fails_closed_naming_the_permission(fake, client):
    fake.environments["perf-gate-fork"] = {"name": "perf-gate-fork",
                                           "protection_rules": [reviewers_rule("alice")]}
    fake.fail_next(403, message="Resource not accessible by integration")
    with pytest.raises(UnknownTrust, match="permissions: actions: read`. Failing closed"):
        check_environment(client, "perf-gate-fork")


def test_github_failing_to_answer_fails_closed(fake, client):
    fake.fail_next(503, times=2)
    with pytest.raises(UnknownTrust, match="cannot read environment 'perf-gate-fork': .*503"):
        check_environment(client, "perf-gate-fork")


def test_an_answer_that_is_not_an_environment_fails_closed(fake, client):
    fake.environments["perf-gate-fork"] = {"name": "perf-gate-fork", "protection_rules": "all"}
    with pytest.raises(UnknownTrust, match="is not an environment"):
        check_environment(client, "perf-gate-fork")


def test_the_environment_name_stays_one_path_segment(fake, client):
    with pytest.raises(TrustError, match="does not exist"):
        check_environment(client, "../../user")
    (get,) = fake.requests
    assert get.path == f"/repos/{fake.repository}/environments/..%2F..%2Fuser"


# -- the approved commit ----------------------------------------------------------------------
def test_the_prs_head_still_at_the_approved_commit_passes(fake, client):
    fake.pulls[7] = {"number": 7, "head": {"sha": SHA}}
    assert check_head(client, 7, SHA) is None


def test_a_pr_that_moved_is_refused_naming_both_commits(fake, client):
    fake.pulls[7] = {"number": 7, "head": {"sha": "b" * 40}}
    moved = f"PR #7's head is {'b' * 40}, not the requested commit {SHA}"
    with pytest.raises(TrustError, match=moved):
        check_head(client, 7, SHA)


@pytest.mark.parametrize("pull", [{"number": 7}, {"number": 7, "head": {"sha": ""}}])
def test_a_pr_answer_without_a_head_fails_closed(fake, client, pull):
    fake.pulls[7] = pull
    with pytest.raises(UnknownTrust, match="has no head commit"):
        check_head(client, 7, SHA)


def test_a_pr_the_token_cannot_see_fails_closed(client):
    with pytest.raises(UnknownTrust, match="cannot read PR #404"):
        check_head(client, 404, SHA)


@pytest.mark.parametrize("value", ["a" * 39, "A" * 40, "g" * 40, "", "a" * 40 + "\n"])
def test_only_a_full_lowercase_commit_sha_is_accepted(value):
    with pytest.raises(GateError, match="is not a full 40-character lowercase commit SHA"):
        check_commit_sha(value, "--sha")
    assert check_commit_sha(SHA, "--sha") == SHA


# -- the approval label -----------------------------------------------------------------------
def test_revoking_a_label_removes_it_and_says_so(fake, client):
    fake.labels[7] = ["documentation", LABEL]
    assert revoke_label(client, 7, LABEL) is True
    assert fake.labels[7] == ["documentation"]


def test_revoking_a_label_already_gone_is_not_an_error(fake, client):
    fake.labels[7] = ["documentation"]
    assert revoke_label(client, 7, LABEL) is False


def test_a_label_still_there_after_github_said_not_found_fails_closed(fake, client):
    fake.labels[7] = [LABEL]
    fake.fail_next(404, message="Not Found", method="DELETE")
    with pytest.raises(UnknownTrust, match=f"could not remove label '{LABEL}' from PR #7"):
        revoke_label(client, 7, LABEL)


def test_a_token_that_may_not_remove_labels_is_refused(fake, clock):
    fake.labels[7] = [LABEL]
    fork = GitHubClient(fake.url, fake.repository, "fork-token",
                        clock=Clock(clock.sleep, clock.now))
    with pytest.raises(GitHubForbidden, match="403"):
        revoke_label(fork, 7, LABEL)
    assert fake.labels[7] == [LABEL]


# -- the client ---------------------------------------------------------------------------------
def test_the_checks_need_a_token_and_a_repository(fake):
    with pytest.raises(GateError, match="needs GITHUB_TOKEN and GITHUB_REPOSITORY"):
        client_for(Settings.from_env({"GITHUB_REPOSITORY": "octo/vllm"}))
    client = client_for(Settings.from_env(fake.job_env()))
    assert client.repository == fake.repository and client.api_url == fake.url


# -- who may write (the no-approval path, the labeller) -------------------------------------
@pytest.mark.parametrize(("role", "permission"), [("admin", "admin"), ("maintain", "write"),
                                                   ("write", "write")])
def test_a_collaborator_who_may_push_passes(fake, client, role, permission):
    fake.permissions["Alice"] = role
    assert check_writer(client, "alice") == permission  # logins match without case
    (asked,) = fake.requests_to("GET", "/permission")
    assert asked.path == f"/repos/{fake.repository}/collaborators/alice/permission"


@pytest.mark.parametrize("role", ["triage", "read", None], ids=["triage", "read", "outsider"])
def test_someone_who_may_not_push_is_refused(fake, client, role):
    """Security review M1: anyone can open a PR from an existing branch of a public
    repository; they are a reader (or nobody) to GitHub."""
    if role:
        fake.permissions["mallory"] = role
    with pytest.raises(TrustError, match="@mallory has 'read' permission.* not write"):
        check_writer(client, "mallory")


@pytest.mark.parametrize("login", ["dependabot[bot]", "", "a b", "-x", "x" * 40])
def test_a_name_that_is_no_persons_login_asks_nothing(fake, client, login):
    with pytest.raises(TrustError, match="is not a person's GitHub login"):
        check_writer(client, login)
    assert fake.requests == []


def test_an_unknown_user_or_an_unreadable_answer_fails_closed(fake, client):
    fake.ghosts.add("ghost")
    with pytest.raises(TrustError, match="not a user GitHub knows"):
        check_writer(client, "ghost")
    fake.fail_next(403, message="Resource not accessible by integration")
    with pytest.raises(UnknownTrust, match="Failing closed"):
        check_writer(client, "alice")
    fake.fail_next(200)
    fake.failures[0].body = {"role": "weird"}
    with pytest.raises(UnknownTrust, match="is not one. Failing closed"):
        check_writer(client, "alice")


# -- who started the run (gate-bisect.yml, gate-rerun.yml) ----------------------------------
REPO = "octo/vllm"
OWN = f"{REPO}/.github/workflows/gate-bisect.yml@refs/heads/main"


def caller(**changes) -> str:
    given = dict(event_name="workflow_dispatch", ref="refs/heads/main", workflow_ref=OWN,
                 repository=REPO, branch="main", workflows=["gate-bisect.yml"])
    return check_caller(**{**given, **changes})


def test_the_workflows_own_dispatch_on_the_default_branch_passes():
    assert caller() == OWN


@pytest.mark.parametrize(("changes", "said"), [
    ({"workflow_ref": "mallory/vllm/.github/workflows/x.yml@refs/pull/7/merge"},
     "a workflow that calls this one"),  # security review H1: a fork's workflow calling it
    ({"workflow_ref": f"{REPO}/.github/workflows/x.yml@refs/heads/main"}, "calls this one"),
    ({"event_name": "pull_request"}, "not on pull_request"),
    ({"event_name": None}, "not on an unknown event"),
    ({"ref": "refs/heads/feature",
      "workflow_ref": f"{REPO}/.github/workflows/gate-bisect.yml@refs/heads/feature"},
     "not refs/heads/main"),
    ({"workflow_ref": None}, "the run's workflow is unknown"),
])
def test_any_other_caller_event_or_branch_is_refused(changes, said):
    with pytest.raises(TrustError, match=said):
        caller(**changes)
