"""A small GitHub REST client: issue comments, who the token is, retries and rate limits.

Retries are urllib3's `Retry` on the client's session (`GitHubRetry`), with what GitHub's
"Rate limits for the REST API" and "Best practices for using the REST API" add to Retry-After:

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

import json
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import requests
from pydantic import SecretStr
from requests.adapters import HTTPAdapter
from urllib3.connectionpool import ConnectionPool
from urllib3.exceptions import HTTPError, MaxRetryError, ResponseError
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

from gate.core.errors import EXIT_ERROR, GateError

USER_AGENT = "vllm-structured-output-gate"
RETRY_STATUSES = frozenset({500, 502, 503, 504})
LIMIT_STATUSES = frozenset({403, 429})  # a rate limit is one of these; a 403 may be no limit
IDEMPOTENT = frozenset({"GET", "HEAD", "PATCH", "PUT", "DELETE"})
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


def rate_limit(status: int, headers: Mapping[str, str], message: str, *, now: float,
               secondary_seen: int) -> RateLimit | None:
    """How long GitHub asks us to wait before retrying an answer (its status, headers and
    message), or None if it is no rate limit."""
    if status not in LIMIT_STATUSES:
        return None
    message = message.lower()
    retry_after = _retry_after(headers.get("retry-after"), now)
    primary = (headers.get("x-ratelimit-remaining") or "").strip() == "0"
    secondary = "secondary rate limit" in message or "abuse" in message
    if status == 403 and not (
        primary or secondary or retry_after is not None or "rate limit" in message
    ):
        return None
    if retry_after is not None:
        return RateLimit(retry_after, f"retry-after {retry_after:.0f} s", secondary)
    reset = (headers.get("x-ratelimit-reset") or "").strip()
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


@dataclass
class WaitBudget:
    """Every wait of one client together, on its clock: the step affords `max_wait_s` in all,
    across requests, and each secondary rate limit waits twice as long as the one before."""

    max_wait_s: float
    clock: Clock
    waited_s: float = 0.0
    secondary_seen: int = 0

    def left(self) -> float:
        return self.max_wait_s - self.waited_s

    def check(self, seconds: float, what: str) -> None:
        """A backoff (not a rate limit's wait) that does not fit fails with what it was for."""
        if seconds > self.left():
            raise GitHubError(f"{what}; no time left to retry (max wait {self.max_wait_s:.0f} s)")

    def sleep(self, seconds: float) -> None:
        self.waited_s += seconds
        self.clock.sleep(seconds)


class GitHubRetry(Retry):
    """urllib3's Retry with GitHub's rules on top (the module docstring): a 403 or 429 is
    looked at whatever the method (a rate-limited request was not acted on), a 5xx or a lost
    connection only for an idempotent one; each wait is GitHub's, decided in `increment` and
    slept in `sleep` on the client's clock, within its budget.

    A wait GitHub asks for that does not fit, or the last attempt failing, raises the
    GitHubError that says why from inside urllib3 (requests passes it through). An answer that
    is not retried (a 403 that is no limit, a POST's 5xx) or a POST's lost connection goes back
    to the client as it is, through urllib3's MaxRetryError, with raise_on_status off."""

    def __init__(self, *args: Any, budget: WaitBudget, wait_s: float = 0.0, **kwargs: Any):
        kwargs.setdefault("raise_on_status", False)
        super().__init__(*args, **kwargs)
        self.budget = budget
        self.wait_s = wait_s  # before the next attempt; set by increment on the new Retry

    def new(self, **kw: Any) -> GitHubRetry:
        kw.setdefault("budget", self.budget)  # one budget for every request of the client
        return super().new(**kw)

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        if status_code in LIMIT_STATUSES:
            return True  # increment reads the answer: a 403 that is no limit goes back
        return status_code in RETRY_STATUSES and self._is_method_retryable(method)

    def get_backoff_time(self) -> float:
        # urllib3 retries the first failure at once; this pauses backoff_factor before it too,
        # then doubles: GitHub's best practices ask for a pause before any retry.
        return min(self.backoff_max, self.backoff_factor * 2 ** max(len(self.history) - 1, 0))

    def sleep(self, response: BaseHTTPResponse | None = None) -> None:
        if self.wait_s > 0:
            self.budget.sleep(self.wait_s)

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> GitHubRetry:
        method, url = (method or "").upper(), url or ""
        where = f"GitHub API {method} {_path(url)}"
        if error is not None and not self._is_method_retryable(method):
            # a write that got no answer may have been applied: the caller looks first
            raise MaxRetryError(_pool, url, error) from error  # type: ignore[arg-type]
        status = response.status if response is not None else None
        said, limit = None, None
        if response is not None:
            message = _said(_read(response), response.reason)
            said = f"HTTP {status}: {message}"
            limit = rate_limit(response.status, response.headers, message,
                               now=self.budget.clock.now(), secondary_seen=self.budget.secondary_seen)
            if limit is None and status in LIMIT_STATUSES:  # no permission: the answer stands
                raise MaxRetryError(_pool, url, ResponseError(said))  # type: ignore[arg-type]
        if limit is not None:
            self.budget.secondary_seen += limit.secondary
            left = self.budget.left()
            if limit.wait_s > left:
                raise GitHubRateLimited(
                    f"{where}: rate limited ({said}); GitHub allows a retry only after "
                    f"{limit.why}, longer than the {max(left, 0):.0f} s this step may still "
                    f"wait (max wait {self.budget.max_wait_s:.0f} s): not retrying early",
                    status=status)
        attempts = len(self.history) + 1
        try:
            new = super().increment(method, url, response, error, _pool, _stacktrace)
        except MaxRetryError:
            if limit is not None:
                raise GitHubRateLimited(f"{where}: still rate limited after {attempts} "
                                        f"attempts ({said})", status=status) from None
            if response is not None:
                raise GitHubError(f"{where}: gave up after {attempts} attempts, last {said}",
                                  status=status) from None
            raise GitHubError(f"{where}: no answer after {attempts} attempts "
                              f"({type(error).__name__})") from None
        if limit is not None:
            new.wait_s = limit.wait_s
        else:
            new.wait_s = new.get_backoff_time()
            what = said or f"no answer ({type(error).__name__})"
            self.budget.check(new.wait_s, f"{where}: {what}")
        return new


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
        retry = retry or RetryPolicy()
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository or ""):
            raise GateError(f"repository {repository!r} is not owner/name")
        if not re.fullmatch(r"https?://[^/?#\s]+(/[^?#\s]*)?", api_url or ""):
            raise GateError(f"API URL {api_url!r} is not an http(s) URL")
        self.api_url = api_url.rstrip("/")
        self.repository = repository
        self.backoff_s = retry.backoff_s
        self.timeout_s = retry.timeout_s
        self.budget = WaitBudget(retry.max_wait_s, clock or Clock())
        self.session = session or requests.Session()
        # Every request of this session goes to the API (_own_url), so every one is retried
        # by GitHub's rules, whatever way a Link header spells the API's host and port.
        adapter = HTTPAdapter(max_retries=GitHubRetry(
            total=retry.max_retries, backoff_factor=retry.backoff_s, allowed_methods=IDEMPOTENT,
            budget=self.budget))
        for scheme in ("https://", "http://"):
            self.session.mount(scheme, adapter)
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
        """One call, retried by GitHubRetry where that is safe; what comes back unretried is
        judged here: a write's lost answer or 5xx is GitHubWriteUnknown, an error status
        GitHubForbidden or GitHubError."""
        url = self._own_url(path_or_url)
        where = f"GitHub API {method} {_path(url)}"
        try:
            resp = self.session.request(method, url, timeout=self.timeout_s, **kwargs)
        except requests.RequestException as exc:
            what = f"no answer ({type(exc).__name__})"
            if method.upper() not in IDEMPOTENT:
                raise GitHubWriteUnknown(f"{where}: {what}; it may have been applied") from None
            raise GitHubError(f"{where}: {what}") from None
        if resp.status_code in RETRY_STATUSES and method.upper() not in IDEMPOTENT:
            raise GitHubWriteUnknown(f"{where}: HTTP {resp.status_code}: {_message(resp)}; it "
                                     "may have been applied", status=resp.status_code)
        return self._check(method, url, resp)

    def backoff(self, attempt: int, what: str = "GitHub did not answer") -> None:
        """A caller's own retry (a write looked up first): sleep 1, 2, 4, ... x backoff_s,
        within what the client may still wait."""
        wait = self.backoff_s * 2**attempt
        self.budget.check(wait, what)
        self.budget.sleep(wait)

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
    """GitHub's message in an answer that came back. A 403's or 429's body was read by
    GitHubRetry (is it a rate limit?), and urllib3 keeps what it read as `raw.data`."""
    body = resp.content or getattr(resp.raw, "data", None) or b""
    return _said(body, resp.reason)


def _read(response: BaseHTTPResponse) -> bytes:
    """The body of an answer GitHubRetry judges, decoded and kept (`.data`) for the client."""
    try:
        return response.read(decode_content=True, cache_content=True)
    except (HTTPError, OSError):  # cut off while reading: judged by its status and headers
        return b""


def _said(body: bytes, reason: str | None) -> str:
    """GitHub's message, with the details of a 422 ("body is too long ...")."""
    try:
        data = json.loads(body)
    except ValueError:
        data = body.decode("utf-8", "replace")
    text = data
    if isinstance(data, dict):
        details = [e.get("message", "") for e in data.get("errors") or [] if isinstance(e, dict)]
        text = "; ".join(str(x) for x in [data.get("message", ""), *details] if x)
    return " ".join(str(text).split())[:300] or reason or ""


def _next_link(link: str) -> str | None:
    match = LINK_NEXT_RE.search(link or "")
    return match.group(1) if match else None


def _path(url: str) -> str:
    """The URL without scheme, host and query: what an error message needs."""
    return re.sub(r"^[a-z]+://[^/]+", "", url).split("?", 1)[0]
