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
    check_commit_sha,
    check_environment,
    check_head,
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
        "name": "perf-gate-fork", "can_admins_bypass": True,
        "protection_rules": [{"type": "wait_timer", "wait_timer": 5},
                             reviewers_rule("alice", "bob", prevent_self_review=False),
                             reviewers_rule("carol")],
    }
    review = check_environment(client, "perf-gate-fork")
    assert (review.name, review.reviewers) == ("perf-gate-fork", 3)  # over every rule
    assert review.prevent_self_review and review.can_admins_bypass


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
