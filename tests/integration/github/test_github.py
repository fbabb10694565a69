"""The GitHub client against a real local HTTP server (support/fake_github.py) that keeps
GitHub's rate-limit windows on a clock shared with the client: a retry sent before GitHub
allows it is refused again, so "never retry early" is observed, not assumed."""

from __future__ import annotations

import pytest
import requests
from support.fake_github import GITHUB_ACTIONS, SECONDARY_MESSAGE, FakeClock, FakeGitHub

from gate.core.errors import EXIT_ERROR
from gate.github.client import (
    Clock,
    GitHubClient,
    GitHubError,
    GitHubForbidden,
    GitHubRateLimited,
    GitHubWriteUnknown,
    RetryPolicy,
)


def client(fake: FakeGitHub, clock: FakeClock, token: str = "good-token", **kw) -> GitHubClient:
    return GitHubClient(fake.url, fake.repository, token, clock=Clock(clock.sleep, clock.now),
                        retry=RetryPolicy(**kw))


def test_lists_all_pages_with_per_page_100(fake, clock):
    for i in range(250):
        fake.add_comment(7, f"comment {i}")
    comments = client(fake, clock).list_comments(7)
    assert [x["body"] for x in comments] == [f"comment {i}" for i in range(250)]
    gets = fake.requests_to("GET", "/issues/7/comments")
    assert len(gets) == 3
    assert gets[0].query == {"per_page": ["100"]}
    assert gets[2].query == {"per_page": ["100"], "page": ["3"]}


def test_pagination_never_follows_a_link_to_another_host(fake, clock):
    """A Link header naming another server gets no request, so never the token."""
    with FakeGitHub(clock=clock.now) as elsewhere:
        for i in range(150):
            fake.add_comment(7, f"comment {i}")
        fake.link_base = elsewhere.url
        with pytest.raises(GitHubError, match="refusing to follow a link to http://127.0.0.1:"):
            client(fake, clock).list_comments(7)
        assert elsewhere.requests == []
    assert len(fake.requests) == 1


def test_create_and_update_as_the_tokens_identity(fake, clock):
    c = client(fake, clock)
    made = c.create_comment(3, "hello")
    assert made["user"]["login"] == GITHUB_ACTIONS
    c.update_comment(made["id"], "bye")
    assert [x["body"] for x in fake.comments[3]] == ["bye"]
    post = fake.requests_to("POST")[0]
    assert post.body == {"body": "hello"}
    assert post.headers["authorization"] == "Bearer good-token"
    assert post.headers["accept"] == "application/vnd.github+json"


def test_fake_refuses_to_edit_someone_elses_comment_and_long_bodies(fake, clock):
    theirs = fake.add_comment(3, "mine", login="alice")
    c = client(fake, clock)
    with pytest.raises(GitHubForbidden, match="Resource not accessible by integration"):
        c.update_comment(theirs["id"], "edited")
    with pytest.raises(GitHubError, match=r"HTTP 422: Validation Failed; body is too long"):
        c.create_comment(3, "x" * 65_537)
    assert c.create_comment(3, "x" * 65_536)["body"] == "x" * 65_536


def test_every_answer_carries_rate_limit_headers(fake, clock):
    resp = requests.get(f"{fake.url}/repos/{fake.repository}", timeout=5,
                        headers={"Authorization": "Bearer good-token"})
    for name in ("limit", "remaining", "used", "reset", "resource"):
        assert f"x-ratelimit-{name}" in resp.headers
    assert resp.headers["x-ratelimit-resource"] == "core"
    bad = requests.get(f"{fake.url}/user", timeout=5)
    assert bad.status_code == 401 and "x-ratelimit-remaining" in bad.headers


def test_authenticated_login_names_a_personal_token_and_none_for_an_installation(fake, clock):
    assert client(fake, clock).authenticated_login() is None  # installation token: 403
    fake.user_tokens["pat"] = "octocat"
    assert client(fake, clock, token="pat").authenticated_login() == "octocat"
    with pytest.raises(GitHubForbidden, match="Bad credentials"):
        client(fake, clock, token="nope").authenticated_login()


@pytest.mark.parametrize("status", [500, 502, 503])
def test_get_retries_5xx_with_exponential_backoff(fake, clock, status):
    fake.fail_next(status, times=3)
    assert client(fake, clock, backoff_s=0.5).list_comments(1) == []
    assert clock.slept == [0.5, 1.0, 2.0]
    assert len(fake.requests) == 4


def test_post_after_a_502_is_not_retried_blindly(fake, clock):
    fake.break_next_create("502")
    with pytest.raises(GitHubWriteUnknown, match="HTTP 502.*may have been applied"):
        client(fake, clock).create_comment(1, "x")
    assert len(fake.requests_to("POST")) == 1
    assert len(fake.comments[1]) == 1  # GitHub did apply it


def test_post_with_a_dropped_connection_is_not_retried_blindly(fake, clock):
    fake.break_next_create("drop")
    with pytest.raises(GitHubWriteUnknown, match="no answer"):
        client(fake, clock).create_comment(1, "x")
    assert len(fake.requests_to("POST")) == 1


def test_429_honours_retry_after(fake, clock):
    fake.fail_next(429, headers={"Retry-After": "7"})
    client(fake, clock).create_comment(1, "x")
    assert clock.slept == [7.0]
    assert len(fake.comments[1]) == 1


def test_primary_limit_waits_until_reset_and_not_a_second_less(fake, clock):
    fake.exhaust_primary(reset_at=clock.now() + 42)
    client(fake, clock).list_comments(1)
    assert clock.slept == [43.0]
    assert len(fake.limited) == 1  # the retry came after the reset: answered
    assert len(fake.requests) == 2


def test_secondary_limit_without_retry_after_waits_a_minute_and_is_no_forbidden(fake, clock):
    fake.secondary_limit()  # GitHub's message, no retry-after, a 60 s window
    assert client(fake, clock).list_comments(1) == []
    assert clock.slept == [60.0]
    assert len(fake.limited) == 1


def test_secondary_limit_honours_its_retry_after(fake, clock):
    fake.secondary_limit(retry_after=25)
    client(fake, clock).create_comment(1, "x")
    assert clock.slept == [25.0]
    assert len(fake.comments[1]) == 1 and len(fake.limited) == 1


def test_retry_after_longer_than_the_step_may_wait_fails_at_once(fake, clock):
    fake.secondary_limit(retry_after=600)
    c = client(fake, clock, max_wait_s=120)
    with pytest.raises(GitHubRateLimited) as info:
        c.list_comments(1)
    assert clock.slept == []  # no early retry
    assert len(fake.requests) == 1
    text = str(info.value)
    assert "retry-after 600 s" in text and "not retrying early" in text
    assert SECONDARY_MESSAGE.split(".")[0] in text
    assert info.value.exit_code == EXIT_ERROR
    assert not isinstance(info.value, GitHubForbidden)


def test_the_wait_budget_covers_every_wait_together(fake, clock):
    fake.fail_next(429, times=2, headers={"Retry-After": "50"})
    with pytest.raises(GitHubRateLimited, match="may still wait"):
        client(fake, clock, max_wait_s=80).list_comments(1)
    assert clock.slept == [50.0]


def test_reset_far_away_fails_with_the_reason(fake, clock):
    fake.exhaust_primary(reset_at=clock.now() + 3000)
    with pytest.raises(GitHubRateLimited, match="x-ratelimit-reset in 3001 s"):
        client(fake, clock, max_wait_s=300).list_comments(1)
    assert clock.slept == []


def test_gives_up_after_max_retries_with_a_clear_error(fake, clock):
    fake.fail_next(502, times=10, message="Server Error")
    with pytest.raises(GitHubError) as info:
        client(fake, clock, max_retries=3).list_comments(5)
    text = str(info.value)
    assert "gave up after 4 attempts" in text and "HTTP 502" in text
    assert "/repos/octo/vllm/issues/5/comments" in text
    assert "good-token" not in text
    assert len(clock.slept) == 3


def test_fork_token_write_is_forbidden_not_retried(fake, clock):
    c = client(fake, clock, token="fork-token")
    assert c.list_comments(1) == []
    with pytest.raises(GitHubForbidden, match="Resource not accessible by integration"):
        c.create_comment(1, "x")
    assert clock.slept == []


def test_connection_refused_is_retried_then_reported():
    slept: list[float] = []
    c = GitHubClient(
        "http://127.0.0.1:9", "o/r", "t", clock=Clock(sleep=slept.append),
        retry=RetryPolicy(max_retries=2, timeout_s=2),
    )
    with pytest.raises(GitHubError, match="no answer after 3 attempts"):
        c.list_comments(1)
    assert len(slept) == 2


def test_rejects_bad_repository_and_api_url():
    with pytest.raises(Exception, match="owner/name"):
        GitHubClient("http://x", "not a repo", "t")
    with pytest.raises(Exception, match="not an http"):
        GitHubClient("file:///etc", "o/r", "t")
