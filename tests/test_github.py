"""The GitHub client against a real local HTTP server (tests/fake_github.py)."""

from __future__ import annotations

import pytest
from fake_github import FakeGitHub

from gate.github import GitHubClient, GitHubError, GitHubForbidden


@pytest.fixture
def fake():
    with FakeGitHub() as server:
        yield server


def client(fake: FakeGitHub, token: str = "good-token", **kw) -> tuple[GitHubClient, list[float]]:
    slept: list[float] = []
    kw.setdefault("now", lambda: 1_000_000.0)
    c = GitHubClient(fake.url, fake.repository, token, sleep=slept.append, **kw)
    return c, slept


def test_lists_all_pages_with_per_page_100(fake):
    for i in range(250):
        fake.add_comment(7, f"comment {i}")
    c, _ = client(fake)
    comments = c.list_comments(7)
    assert [x["body"] for x in comments] == [f"comment {i}" for i in range(250)]
    gets = fake.requests_to("GET", "/issues/7/comments")
    assert len(gets) == 3
    assert gets[0].query == {"per_page": ["100"]}
    assert gets[2].query == {"per_page": ["100"], "page": ["3"]}


def test_create_and_update(fake):
    c, _ = client(fake)
    made = c.create_comment(3, "hello")
    c.update_comment(made["id"], "bye")
    assert [x["body"] for x in fake.comments[3]] == ["bye"]
    post = fake.requests_to("POST")[0]
    assert post.body == {"body": "hello"}
    assert post.headers["authorization"] == "Bearer good-token"
    assert post.headers["accept"] == "application/vnd.github+json"


def test_token_check_tolerates_github_token_lack_of_user(fake):
    c, _ = client(fake)
    assert c.check_token() == f"repository {fake.repository}"
    fake.user_tokens.add("pat")
    c, _ = client(fake, token="pat")
    assert c.check_token() == "user gate-bot"


def test_bad_token_is_forbidden(fake):
    c, _ = client(fake, token="nope")
    with pytest.raises(GitHubForbidden, match="Bad credentials"):
        c.check_token()


@pytest.mark.parametrize("status", [500, 502, 503])
def test_retries_5xx_with_exponential_backoff(fake, status):
    fake.fail_next(status, times=3)
    c, slept = client(fake, backoff_s=0.5)
    assert c.list_comments(1) == []
    assert slept == [0.5, 1.0, 2.0]
    assert len(fake.requests) == 4


def test_429_honours_retry_after(fake):
    fake.fail_next(429, headers={"Retry-After": "7"})
    c, slept = client(fake)
    c.create_comment(1, "x")
    assert slept == [7.0]
    assert len(fake.comments[1]) == 1


def test_403_rate_limit_waits_until_reset(fake):
    reset = str(1_000_000 + 42)
    fake.fail_next(
        403,
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset},
        message="API rate limit exceeded",
    )
    c, slept = client(fake)
    c.list_comments(1)
    assert slept == [43.0]


def test_sleep_is_capped(fake):
    fake.fail_next(429, headers={"Retry-After": "3600"})
    c, slept = client(fake, max_sleep_s=30)
    c.list_comments(1)
    assert slept == [30.0]


def test_gives_up_after_max_retries_with_a_clear_error(fake):
    fake.fail_next(502, times=10, message="Server Error")
    c, slept = client(fake, max_retries=3)
    with pytest.raises(GitHubError) as info:
        c.list_comments(5)
    text = str(info.value)
    assert "gave up after 4 attempts" in text and "HTTP 502" in text
    assert "/repos/octo/vllm/issues/5/comments" in text
    assert "good-token" not in text
    assert len(slept) == 3


def test_fork_token_write_is_forbidden_not_retried(fake):
    c, slept = client(fake, token="fork-token")
    assert c.list_comments(1) == []
    with pytest.raises(GitHubForbidden, match="Resource not accessible by integration"):
        c.create_comment(1, "x")
    assert slept == []


def test_connection_refused_is_retried_then_reported():
    slept: list[float] = []
    c = GitHubClient(
        "http://127.0.0.1:9", "o/r", "t", sleep=slept.append, max_retries=2, timeout_s=2
    )
    with pytest.raises(GitHubError, match="no answer after 3 attempts"):
        c.list_comments(1)
    assert len(slept) == 2


def test_rejects_bad_repository():
    with pytest.raises(Exception, match="owner/name"):
        GitHubClient("http://x", "not a repo", "t")
