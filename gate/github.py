"""A small GitHub REST client: issue comments, a token check, retries and rate limits.

Only what the gate needs. Retries with exponential backoff on 5xx, connection errors and rate
limits (429, or 403 with `x-ratelimit-remaining: 0`), honouring `Retry-After` and
`x-ratelimit-reset` up to `max_sleep`. `sleep` and `now` are injectable so tests run fast.

A 403 that is not a rate limit (a fork PR's read-only token: "Resource not accessible by
integration") raises `GitHubForbidden`, which `gate publish` turns into a comment file for the
comment-poster workflow. The token is only ever placed in the Authorization header.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import requests
from pydantic import SecretStr

from gate.errors import EXIT_ERROR, GateError

USER_AGENT = "vllm-structured-output-gate"
RETRY_STATUSES = {500, 502, 503, 504}
LINK_NEXT_RE = re.compile(r'<([^>]+)>\s*;\s*rel="next"')


class GitHubError(GateError):
    """GitHub answered with an error, or did not answer after all retries."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


class GitHubForbidden(GitHubError):
    """403/404 that is not a rate limit: the token may not do this (e.g. a fork PR's token)."""


class GitHubClient:
    def __init__(
        self,
        api_url: str,
        repository: str,
        token: SecretStr | str | None,
        *,
        session: requests.Session | None = None,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        max_sleep_s: float = 60.0,
        timeout_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], float] = time.time,
    ):
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository or ""):
            raise GateError(f"repository {repository!r} is not owner/name")
        self.api_url = api_url.rstrip("/")
        self.repository = repository
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_sleep_s = max_sleep_s
        self.timeout_s = timeout_s
        self.sleep = sleep
        self.now = now
        self.session = session or requests.Session()
        self.session.headers.update(
            {
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": USER_AGENT,
            }
        )
        secret = token.get_secret_value() if isinstance(token, SecretStr) else token
        if secret:
            self.session.headers["Authorization"] = f"Bearer {secret}"

    # -- transport ------------------------------------------------------------------------
    def request(self, method: str, path_or_url: str, **kwargs: Any) -> requests.Response:
        url = path_or_url if "://" in path_or_url else f"{self.api_url}{path_or_url}"
        for attempt in range(self.max_retries + 1):
            try:
                resp = self.session.request(method, url, timeout=self.timeout_s, **kwargs)
            except requests.RequestException as exc:
                if attempt == self.max_retries:
                    raise GitHubError(
                        f"GitHub API {method} {_path(url)}: no answer after "
                        f"{attempt + 1} attempts ({type(exc).__name__})"
                    ) from None
                self.sleep(self._backoff(attempt))
                continue
            wait = self._retry_wait(resp, attempt)
            if wait is None:
                return self._check(method, url, resp)
            if attempt == self.max_retries:
                raise GitHubError(
                    f"GitHub API {method} {_path(url)}: gave up after {attempt + 1} attempts, "
                    f"last HTTP {resp.status_code}: {_message(resp)}",
                    status=resp.status_code,
                )
            self.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _backoff(self, attempt: int) -> float:
        return min(self.backoff_s * (2**attempt), self.max_sleep_s)

    def _retry_wait(self, resp: requests.Response, attempt: int) -> float | None:
        """Seconds to wait before retrying, or None when the answer is final."""
        status = resp.status_code
        limited = status == 429 or (status == 403 and _is_rate_limit(resp))
        if not limited and status not in RETRY_STATUSES:
            return None
        retry_after = resp.headers.get("retry-after")
        if retry_after and retry_after.strip().isdigit():
            return min(float(retry_after), self.max_sleep_s)
        reset = resp.headers.get("x-ratelimit-reset")
        if limited and reset and reset.strip().isdigit():
            return min(max(float(reset) - self.now(), 0.0) + 1.0, self.max_sleep_s)
        return self._backoff(attempt)

    def _check(self, method: str, url: str, resp: requests.Response) -> requests.Response:
        if resp.status_code < 400:
            return resp
        text = f"GitHub API {method} {_path(url)}: HTTP {resp.status_code}: {_message(resp)}"
        if resp.status_code in (401, 403, 404):
            raise GitHubForbidden(text, status=resp.status_code)
        raise GitHubError(text, status=resp.status_code)

    def paginate(self, path: str, params: dict[str, Any] | None = None) -> Iterator[Any]:
        url: str | None = path
        query: dict[str, Any] | None = {"per_page": 100, **(params or {})}
        while url:
            resp = self.request("GET", url, params=query)
            items = resp.json()
            if not isinstance(items, list):
                raise GitHubError(f"GitHub API GET {_path(url)}: expected a list")
            yield from items
            url = _next_link(resp.headers.get("link", ""))
            query = None  # the next link carries its own query

    # -- endpoints ------------------------------------------------------------------------
    def check_token(self) -> str:
        """Confirm the token works. GITHUB_TOKEN (an installation token) gets 403 on /user,
        so fall back to reading the repository. Returns who/what answered."""
        try:
            login = self.request("GET", "/user").json().get("login")
            return f"user {login}"
        except GitHubForbidden:
            pass
        self.request("GET", f"/repos/{self.repository}")
        return f"repository {self.repository}"

    def list_comments(self, issue: int) -> list[dict[str, Any]]:
        return list(self.paginate(f"/repos/{self.repository}/issues/{int(issue)}/comments"))

    def create_comment(self, issue: int, body: str) -> dict[str, Any]:
        path = f"/repos/{self.repository}/issues/{int(issue)}/comments"
        return self.request("POST", path, json={"body": body}).json()

    def update_comment(self, comment_id: int, body: str) -> dict[str, Any]:
        path = f"/repos/{self.repository}/issues/comments/{int(comment_id)}"
        return self.request("PATCH", path, json={"body": body}).json()

    def pull_request(self, number: int) -> dict[str, Any]:
        return self.request("GET", f"/repos/{self.repository}/pulls/{int(number)}").json()


def _is_rate_limit(resp: requests.Response) -> bool:
    if resp.headers.get("x-ratelimit-remaining", "").strip() == "0":
        return True
    return "rate limit" in _message(resp).lower()


def _message(resp: requests.Response) -> str:
    try:
        data = resp.json()
        text = data.get("message", "") if isinstance(data, dict) else ""
    except ValueError:
        text = resp.text
    return " ".join(str(text).split())[:300] or resp.reason or ""


def _next_link(link: str) -> str | None:
    match = LINK_NEXT_RE.search(link or "")
    return match.group(1) if match else None


def _path(url: str) -> str:
    """The URL without scheme, host and query: what an error message needs."""
    return re.sub(r"^[a-z]+://[^/]+", "", url).split("?", 1)[0]
