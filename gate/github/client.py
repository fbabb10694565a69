"""A small GitHub REST client: issue comments, who the token is, retries and rate limits.

It follows GitHub's "Rate limits for the REST API" and "Best practices for using the REST API":

- A 429, or a 403 that is a rate limit (`x-ratelimit-remaining: 0`, a `retry-after` header,
  or the "secondary rate limit" / "abuse detection" message), is retried no earlier than
  `retry-after` seconds, else than `x-ratelimit-reset`, else than one minute (doubling for
  each further secondary limit). Such a 403 is not "no permission".
- When that wait would take the client past `max_wait_s` of waiting in all (what the step can
  afford), it fails at once with `GitHubRateLimited` (exit 4) saying why; it never retries
  early.
- 5xx answers and dropped connections are retried with exponential backoff for GET and PATCH
  (both idempotent here), never for POST: a POST whose fate is unknown raises
  `GitHubWriteUnknown`, and the caller looks at what landed before posting again.
- Pagination follows `Link: rel="next"` only on the API's own scheme, host and port, and
  every request goes there: the token, only ever in the Authorization header, goes nowhere
  else.

A 401/403/404 that is not a rate limit (a fork PR's read-only token: "Resource not accessible
by integration") raises `GitHubForbidden`. `sleep` and `now` are injectable for tests.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import requests
from pydantic import SecretStr

from gate.core.errors import EXIT_ERROR, GateError

USER_AGENT = "vllm-structured-output-gate"
RETRY_STATUSES = {500, 502, 503, 504}
IDEMPOTENT = {"GET", "HEAD", "PATCH", "PUT", "DELETE"}
LINK_NEXT_RE = re.compile(r'<([^>]+)>\s*;\s*rel="next"')
# The identity GITHUB_TOKEN comments as. An installation token cannot read GET /user (403),
# so this is the documented fallback (see gate.github.publish.identify).
GITHUB_ACTIONS_LOGIN = "github-actions[bot]"
SECONDARY_MIN_WAIT_S = 60.0  # "wait for at least one minute before retrying"
DEFAULT_MAX_WAIT_S = 300.0


class GitHubError(GateError):
    """GitHub answered with an error, or did not answer after all retries."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


class GitHubForbidden(GitHubError):
    """401/403/404 that is not a rate limit: the token may not do this (a fork PR's token)."""


class GitHubRateLimited(GitHubError):
    """Rate limited, and the wait GitHub asks for is longer than the client may still wait."""


class GitHubWriteUnknown(GitHubError):
    """A POST got a 5xx or no answer: GitHub may or may not have applied it."""


@dataclass(frozen=True)
class RateLimit:
    wait_s: float
    why: str
    secondary: bool


def rate_limit(resp: requests.Response, now: float, secondary_seen: int) -> RateLimit | None:
    """How long GitHub asks us to wait before retrying `resp`, or None if it is no rate limit."""
    if resp.status_code not in (403, 429):
        return None
    message = _message(resp).lower()
    retry_after = _retry_after(resp.headers.get("retry-after"), now)
    primary = resp.headers.get("x-ratelimit-remaining", "").strip() == "0"
    secondary = "secondary rate limit" in message or "abuse" in message
    if resp.status_code == 403 and not (
        primary or secondary or retry_after is not None or "rate limit" in message
    ):
        return None
    if retry_after is not None:
        return RateLimit(retry_after, f"retry-after {retry_after:.0f} s", secondary)
    reset = resp.headers.get("x-ratelimit-reset", "").strip()
    if primary and reset.isdigit():
        wait = max(int(reset) - now, 0.0) + 1.0  # +1: "after" the reset, clocks differ
        return RateLimit(wait, f"x-ratelimit-reset in {wait:.0f} s", False)
    wait = SECONDARY_MIN_WAIT_S * 2**secondary_seen
    return RateLimit(wait, f"no retry-after: wait at least a minute, doubling ({wait:.0f} s)", True)


@dataclass(frozen=True)
class RetryPolicy:
    """How hard the client tries: attempts per request, the first backoff (doubling), the most
    it waits in all for rate limits, and each request's timeout."""

    max_retries: int = 5
    backoff_s: float = 1.0
    max_wait_s: float = DEFAULT_MAX_WAIT_S
    timeout_s: float = 30.0


@dataclass(frozen=True)
class Clock:
    """Time as the client sees it (a test passes a fake one)."""

    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], float] = time.time


class GitHubClient:
    def __init__(
        self,
        api_url: str,
        repository: str,
        token: SecretStr | str | None,
        *,
        session: requests.Session | None = None,
        retry: RetryPolicy | None = None,
        clock: Clock | None = None,
    ):
        retry, clock = retry or RetryPolicy(), clock or Clock()
        max_retries, backoff_s, max_wait_s, timeout_s = (
            retry.max_retries, retry.backoff_s, retry.max_wait_s, retry.timeout_s)
        sleep, now = clock.sleep, clock.now
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository or ""):
            raise GateError(f"repository {repository!r} is not owner/name")
        if not re.fullmatch(r"https?://[^/?#\s]+(/[^?#\s]*)?", api_url or ""):
            raise GateError(f"API URL {api_url!r} is not an http(s) URL")
        self.api_url = api_url.rstrip("/")
        self.repository = repository
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s
        self.waited_s = 0.0
        self.timeout_s = timeout_s
        self.sleep = sleep
        self.now = now
        self._secondary_seen = 0
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
        url = self._own_url(path_or_url)
        for attempt in range(self.max_retries + 1):
            try:
                resp = self.session.request(method, url, timeout=self.timeout_s, **kwargs)
            except requests.RequestException as exc:
                self._transient(method, url, attempt=attempt,
                                what=f"no answer ({type(exc).__name__})")
                continue
            limit = rate_limit(resp, self.now(), self._secondary_seen)
            if limit is not None:
                self._wait_for_limit(method, url, attempt=attempt, resp=resp, limit=limit)
                continue
            if resp.status_code in RETRY_STATUSES:
                what = f"HTTP {resp.status_code}: {_message(resp)}"
                self._transient(method, url, attempt=attempt, what=what, status=resp.status_code)
                continue
            return self._check(method, url, resp)
        raise AssertionError("unreachable")  # pragma: no cover - the last attempt raises

    def _transient(self, method: str, url: str, *, attempt: int, what: str, status=None) -> None:
        """A 5xx or no answer: retry later if that is safe and affordable, else raise."""
        where = f"GitHub API {method} {_path(url)}"
        if method not in IDEMPOTENT:
            raise GitHubWriteUnknown(f"{where}: {what}; it may have been applied", status=status)
        if attempt == self.max_retries:
            if status is None:
                raise GitHubError(f"{where}: no answer after {attempt + 1} attempts ({what})")
            raise GitHubError(f"{where}: gave up after {attempt + 1} attempts, last {what}",
                              status=status)
        self.backoff(attempt, f"{where}: {what}")

    def backoff(self, attempt: int, what: str = "GitHub did not answer") -> None:
        """Sleep 1, 2, 4, ... x backoff_s, within what the client may still wait."""
        wait = self.backoff_s * 2**attempt
        if self.waited_s + wait > self.max_wait_s:
            raise GitHubError(f"{what}; no time left to retry (max wait {self.max_wait_s:.0f} s)")
        self._sleep(wait)

    def _wait_for_limit(self, method, url, *, attempt, resp, limit: RateLimit) -> None:
        where = f"GitHub API {method} {_path(url)}"
        said = f"HTTP {resp.status_code}: {_message(resp)}"
        self._secondary_seen += limit.secondary
        left = self.max_wait_s - self.waited_s
        if limit.wait_s > left:
            raise GitHubRateLimited(
                f"{where}: rate limited ({said}); GitHub allows a retry only after "
                f"{limit.why}, longer than the {max(left, 0):.0f} s this step may still wait "
                f"(max wait {self.max_wait_s:.0f} s): not retrying early",
                status=resp.status_code,
            )
        if attempt == self.max_retries:
            raise GitHubRateLimited(f"{where}: still rate limited after {attempt + 1} attempts "
                                    f"({said})", status=resp.status_code)
        self._sleep(limit.wait_s)

    def _sleep(self, seconds: float) -> None:
        self.waited_s += seconds
        self.sleep(seconds)

    def _own_url(self, path_or_url: str) -> str:
        """A path on the API, or an absolute URL that is on the API itself (scheme, host,
        port and base path): a Link header pointing elsewhere never gets the token."""
        if "://" not in path_or_url:
            return f"{self.api_url}{path_or_url}"
        api, url = urlsplit(self.api_url), urlsplit(path_or_url)
        if _origin(url) != _origin(api) or not (url.path + "/").startswith(api.path + "/"):
            port = f":{url.port}" if url.port else ""
            raise GitHubError(
                f"refusing to follow a link to {url.scheme}://{url.hostname}{port}{url.path}: "
                f"it is not the GitHub API at {self.api_url}, and the token goes nowhere else"
            )
        return path_or_url

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
    def authenticated_login(self) -> str | None:
        """The token's login from GET /user (a personal or app user token), or None for an
        installation token (GITHUB_TOKEN, a GitHub App's), which GitHub answers with 403."""
        try:
            login = self.request("GET", "/user").json().get("login")
        except GitHubForbidden as exc:
            if exc.status == 403:
                return None
            raise
        return login if isinstance(login, str) and login else None

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

    # -- issues, workflow dispatch, permissions (gate history alert and acknowledge) --------
    def list_issues(self, state: str = "all") -> list[dict[str, Any]]:
        """The repository's issues (not pull requests, which the endpoint also lists)."""
        found = self.paginate(f"/repos/{self.repository}/issues", {"state": state})
        return [i for i in found if isinstance(i, dict) and "pull_request" not in i]

    def create_issue(self, title: str, body: str) -> dict[str, Any]:
        path = f"/repos/{self.repository}/issues"
        return self.request("POST", path, json={"title": title, "body": body}).json()

    def update_issue(self, number: int, **fields: Any) -> dict[str, Any]:
        """PATCH title, body, state ("open"/"closed") and state_reason of an issue."""
        path = f"/repos/{self.repository}/issues/{int(number)}"
        return self.request("PATCH", path, json=fields).json()

    def dispatch_workflow(self, workflow: str, ref: str, inputs: dict[str, str]) -> None:
        """workflow_dispatch of `workflow` (its file name) on `ref`, with its inputs."""
        path = f"/repos/{self.repository}/actions/workflows/{workflow}/dispatches"
        self.request("POST", path, json={"ref": ref, "inputs": inputs})

    def collaborator_permission(self, login: str) -> str:
        """`login`'s permission on the repository (admin, write, read or none); a login
        GitHub does not know is none."""
        path = f"/repos/{self.repository}/collaborators/{login}/permission"
        try:
            answer = self.request("GET", path).json()
        except GitHubForbidden as exc:
            if exc.status == 404:
                return "none"
            raise
        permission = answer.get("permission") if isinstance(answer, dict) else None
        return permission if isinstance(permission, str) else "none"


def _origin(url) -> tuple[str, str, int]:
    scheme = url.scheme.lower()
    return scheme, (url.hostname or "").lower(), url.port or (443 if scheme == "https" else 80)


def _retry_after(value: str | None, now: float) -> float | None:
    """`retry-after` in seconds: an integer, or an HTTP date."""
    value = (value or "").strip()
    if value.isdigit():
        return float(value)
    if not value:
        return None
    try:
        return max(parsedate_to_datetime(value).timestamp() - now, 0.0)
    except (TypeError, ValueError):
        return None


def _message(resp: requests.Response) -> str:
    """GitHub's message, with the details of a 422 ("body is too long ...")."""
    try:
        data = resp.json()
    except ValueError:
        data = resp.text
    text = data
    if isinstance(data, dict):
        details = [e.get("message", "") for e in data.get("errors") or [] if isinstance(e, dict)]
        text = "; ".join(str(x) for x in [data.get("message", ""), *details] if x)
    return " ".join(str(text).split())[:300] or resp.reason or ""


def _next_link(link: str) -> str | None:
    match = LINK_NEXT_RE.search(link or "")
    return match.group(1) if match else None


def _path(url: str) -> str:
    """The URL without scheme, host and query: what an error message needs."""
    return re.sub(r"^[a-z]+://[^/]+", "", url).split("?", 1)[0]
