"""A real HTTP server on 127.0.0.1 that speaks the GitHub REST endpoints the gate calls, and
behaves like GitHub where the gate's rules depend on it.

Endpoints: GET/POST /repos/{o}/{r}/issues/{n}/comments (per_page, page, Link headers with
absolute URLs on this server), PATCH /repos/{o}/{r}/issues/comments/{id}, GET /repos/{o}/{r},
GET /repos/{o}/{r}/pulls/{n}, GET /user.

Tokens (the Authorization header) map to who GitHub says they are:
- `good_tokens`: installation tokens like GITHUB_TOKEN: comments are written by
  github-actions[bot]; GET /user answers 403 "Resource not accessible by integration";
- `app_tokens`: a GitHub App's installation tokens, token -> "slug[bot]"; 403 on GET /user;
- `user_tokens`: personal tokens, token -> login (GET /user answers it);
- `fork_tokens`: read-only installation tokens: 403 on every write;
- anything else: 401 "Bad credentials".

Like GitHub: comments carry `user.login`/`user.type`; a PATCH of a comment someone else wrote
is 403; a body over 65,536 characters is 422 with GitHub's message; every answer carries
x-ratelimit-limit/remaining/used/reset/resource; `exhaust_primary(reset_at)` answers 403 "API
rate limit exceeded" with remaining 0 until `clock()` reaches reset_at; `secondary_limit()`
answers GitHub's secondary-limit 403 (with or without retry-after) until its window has passed
on `clock()`, so a client that retries early is refused again.

Failures to inject, consumed in order: `fail_next(status, times, headers, message, method)`;
`break_next_create(mode)`: the next POST creates its comment (or issue) and then answers 502
("502") or drops the connection without an answer ("drop"). `link_base` makes Link headers point to
another server. `clock` is injectable (tests share a FakeClock with the client).

Environments, labels and reviews (`gate trust`): GET /repos/{o}/{r}/environments/{name}
answers from `environments`; GET /repos/{o}/{r}/issues/{n}/labels and DELETE
.../labels/{name} use `labels`; GET /repos/{o}/{r}/pulls/{n}/reviews lists `reviews[n]`
(oldest first, like GitHub), paged by per_page/page with Link headers; `add_review` builds one
as GitHub shows it.

Commits (`gate trust check-on-default-branch`): GET /repos/{o}/{r} names `default_branch`;
GET /repos/{o}/{r}/compare/{base}...{head} answers GitHub's `status` from `branches` (a name ->
its commits, oldest first): identical (head is the branch's tip), behind (an older commit of
it), diverged (a commit in `elsewhere`, e.g. a fork's, which GitHub's compare also finds), or
404 for a commit it does not know. Other repositories (the gate's, whose pinned commit the
workflows check) answer the same two endpoints from `others[owner/name]`, a
{"default_branch": ..., "branches": ...} dict; any other repository is 404.

Collaborators (`gate trust check-writer`, `check-review`): GET
/repos/{o}/{r}/collaborators/{username}/permission answers `permission` and `role_name` from
`permissions` (a login -> its role: admin, maintain, write, triage, read), matched without
case like GitHub; `permission` is GitHub's legacy base role (maintain is reported as write,
triage as read). Any other login answers read (what GitHub says of a user of a public
repository who is no collaborator), a login in `ghosts` 404 (no such user).

Actions runs and artifacts (`gate artifact fetch`): `add_run(workflow, title, artifacts,
event=..., branch=...)` keeps a completed run as GitHub shows it: `event`, `path`
(.github/workflows/FILE), `display_title` (the title the workflow's run-name gave it: the
measured commit is in there, and only there), `head_branch` and `head_sha` (the branch the
workflow file ran from and its tip when the run started: for `pull_request_target` the PR's
base branch, for `workflow_dispatch` the dispatched branch; never the measured commit of a
PR, unlike `head_sha` of a `pull_request` run), `head_repository` (this repository: the
run's ref is one of its branches). A branch without commits in `branches` gets one. GET
/repos/{o}/{r}/actions/workflows/{file}/runs lists that workflow's runs newest first
(`workflow_runs`, `total_count`), filtered by `head_sha`, `event`, `branch` and `status`
like GitHub, paged by per_page (at most 100) and page; GET .../actions/runs/{id}/
artifacts?name= its artifacts, and GET .../actions/artifacts/{id}/zip answers 302 to
/blob/{id} on `blob_host` (like GitHub's signed URL on another host), which serves the zip to
anyone.

Issues, workflow dispatch and permissions (`gate history alert` and `acknowledge`): GET
/repos/{o}/{r}/issues lists `issues` (state=open|closed|all, default open; paged, newest first
like GitHub, pull requests among them when `pulls_in_issues`); POST /repos/{o}/{r}/issues opens
one written by the token's identity; PATCH /repos/{o}/{r}/issues/{n} edits title, body, state
and state_reason (403 for a read-only token); POST /repos/{o}/{r}/actions/workflows/{file}/
dispatches answers 204 and keeps the dispatch in `dispatches`, 404 for a workflow not in
`workflows`, 422 "Unexpected inputs provided" for an input the workflow does not declare,
like GitHub; GET /repos/{o}/{r}/collaborators/{login}/permission answers GitHub's
{permission, role_name, user} from `permissions` (a login not there: none; one in
`unknown_users`: 404).

Every request is recorded (method, path, query, headers, body) for assertions.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

GITHUB_ACTIONS = "github-actions[bot]"
TOKEN = "ghs_FakeGitHubJobToken_0123456789"  # a job's GITHUB_TOKEN; the `fake` fixture accepts it
MAX_BODY = 65_536
RATE_LIMIT = 5000
INTEGRATION_403 = "Resource not accessible by integration"
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID "
    "C0DE:1234:5678:9ABC:DEF0."
)
PRIMARY_MESSAGE = (
    "API rate limit exceeded for installation ID 1234567. If you reach out to GitHub Support "
    "for help, please include the request ID C0DE:1234:5678:9ABC:DEF1."
)
DOCS = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"
DROP = object()  # a handler answer: close the connection without a response


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class Failure:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)
    method: str | None = None


class FakeClock:
    """Shared by the client (sleep, now) and the server (clock): sleeping moves time on."""

    def __init__(self, start: float = 1_000_000.0):
        self.t = start
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


class FakeGitHub:
    def __init__(
        self,
        repository: str = "octo/vllm",
        *,
        clock: Callable[[], float] = time.time,
    ):
        self.repository = repository
        self.clock = clock
        self.good_tokens: set[str] = {"good-token"}
        self.app_tokens: dict[str, str] = {}
        self.user_tokens: dict[str, str] = {}
        self.fork_tokens: set[str] = {"fork-token"}
        self.comments: dict[int, list[dict[str, Any]]] = {}
        self.pulls: dict[int, dict[str, Any]] = {}
        self.environments: dict[str, dict[str, Any]] = {}  # name -> GitHub's environment JSON
        self.labels: dict[int, list[str]] = {}  # issue/PR number -> label names
        self.default_branch = "main"
        self.branches: dict[str, list[str]] = {}  # branch -> its commits, oldest first
        self.elsewhere: set[str] = set()  # commits of other branches or forks
        self.reviews: dict[int, list[dict[str, Any]]] = {}  # PR number -> reviews, oldest first
        self.permissions: dict[str, str] = {}  # login -> role (admin, maintain, write, ...)
        self.others: dict[str, dict[str, Any]] = {}  # owner/name -> default_branch, branches
        self.ghosts: set[str] = set()  # logins GitHub does not know
        self.issues: dict[int, dict[str, Any]] = {}  # number -> the issue as GitHub shows it
        self.workflows: dict[str, set[str]] = {}  # workflow file -> the inputs it declares
        self.dispatches: list[dict[str, Any]] = []  # (workflow, ref, inputs) as received
        self.unknown_users: set[str] = set()
        self.requests: list[Recorded] = []
        self.failures: list[Failure] = []
        self.break_creates: list[str] = []
        self.link_base: str | None = None
        self.used = 0
        self.primary_reset: float | None = None
        self.secondary_until: float | None = None
        self.secondary_retry_after = False
        self.limited: list[Recorded] = []  # requests answered with a rate-limit 403
        self.runs: list[dict[str, Any]] = []  # completed workflow runs, oldest first
        self.artifacts: dict[int, list[dict[str, Any]]] = {}  # run id -> its artifacts
        self.blobs: dict[int, bytes] = {}  # artifact id -> its zip archive
        self.blob_host = "localhost"  # another host name for this server: no token goes there
        self._next_id = 1000
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control --------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeGitHub:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def job_env(self, token: str = TOKEN) -> dict[str, str]:
        """The variables a job's `gate` reads to reach this server as `token`."""
        return {"GITHUB_API_URL": self.url, "GITHUB_REPOSITORY": self.repository,
                "GITHUB_TOKEN": token}

    def fail_next(
        self,
        status: int,
        times: int = 1,
        headers: dict[str, str] | None = None,
        message: str = "injected failure",
        method: str | None = None,
    ) -> None:
        for _ in range(times):
            self.failures.append(Failure(status, headers or {}, {"message": message}, method))

    def break_next_create(self, mode: str = "502") -> None:
        """The next POST of a comment is applied, then answered 502 or not at all ("drop")."""
        assert mode in ("502", "drop")
        self.break_creates.append(mode)

    def exhaust_primary(self, reset_at: float) -> None:
        self.primary_reset = reset_at

    def secondary_limit(self, retry_after: int | None = None) -> None:
        """GitHub's secondary limit for the next `retry_after` seconds (60 when None, and no
        retry-after header is sent then)."""
        self.secondary_until = self.clock() + (retry_after or 60)
        self.secondary_retry_after = retry_after is not None

    def login_of(self, token: str) -> str | None:
        if token in self.good_tokens or token in self.fork_tokens:
            return GITHUB_ACTIONS
        return self.app_tokens.get(token) or self.user_tokens.get(token)

    def add_comment(self, issue: int, body: str, login: str = "someone") -> dict[str, Any]:
        with self._lock:
            return self._add_comment(issue, body, login)

    def _add_comment(self, issue: int, body: str, login: str) -> dict[str, Any]:
        self._next_id += 1
        comment = {
            "id": self._next_id,
            "body": body,
            "user": {"login": login, "type": "Bot" if login.endswith("[bot]") else "User"},
            "html_url": f"https://github.com/{self.repository}/pull/{issue}#issuecomment-{self._next_id}",
        }
        self.comments.setdefault(issue, []).append(comment)
        return comment

    def add_review(self, pr: int, login: str, state: str, commit_id: str) -> dict[str, Any]:
        """A submitted review as GET .../pulls/{n}/reviews shows it."""
        with self._lock:
            self._next_id += 1
            review = {
                "id": self._next_id,
                "user": {"login": login, "type": "User"},
                "body": "",
                "state": state,
                "commit_id": commit_id,
                "html_url": f"https://github.com/{self.repository}/pull/{pr}"
                f"#pullrequestreview-{self._next_id}",
                "submitted_at": "2026-01-01T00:00:00Z",
            }
            self.reviews.setdefault(pr, []).append(review)
            return review

    def add_run(self, workflow: str, title: str, artifacts: dict[str, bytes], *,
                event: str = "pull_request_target", branch: str | None = None,
                repository: str | None = None) -> int:
        """A completed run of `workflow` titled `title`, that kept `artifacts` (name -> zip).
        Its file ran from `branch` (default: the default branch; a PR's base branch for
        `pull_request_target`), whose tip is its `head_sha`."""
        with self._lock:
            self._next_id += 1
            run_id = self._next_id
            branch = branch or self.default_branch
            history = self.branches.setdefault(branch, [hashlib.sha1(branch.encode()).hexdigest()])
            self.runs.append({
                "id": run_id, "name": workflow.removesuffix(".yml"), "display_title": title,
                "event": event, "status": "completed", "conclusion": "success",
                "head_branch": branch, "head_sha": history[-1],
                "path": f".github/workflows/{workflow}",
                "head_repository": {"full_name": repository or self.repository},
                "repository": {"full_name": self.repository},
                "created_at": f"2026-12-03T10:{len(self.runs):02d}:00Z",
                "html_url": f"https://github.com/{self.repository}/actions/runs/{run_id}"})
            self.artifacts[run_id] = []
            for name, data in artifacts.items():
                self._next_id += 1
                self.blobs[self._next_id] = data
                self.artifacts[run_id].append({"id": self._next_id, "name": name,
                                               "expired": False, "size_in_bytes": len(data)})
        return run_id

    def requests_to(self, method: str, fragment: str = "") -> list[Recorded]:
        return [r for r in self.requests if r.method == method and fragment in r.path]

    # -- request handling, called by the handler ------------------------------------------
    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: Any):
        split = urlsplit(raw_path)
        query = parse_qs(split.query)
        recorded = Recorded(method, split.path, query, headers, body)
        with self._lock:
            self.requests.append(recorded)
            failure = self._take_failure(method)
        if failure:
            return failure.status, failure.headers, failure.body
        if split.path.startswith("/blob/") and method == "GET":
            blob = self.blobs.get(int(split.path.rsplit("/", 1)[1]))
            return (200, {}, blob) if blob is not None else (404, {}, {"message": "Not Found"})
        token = headers.get("authorization", "").removeprefix("Bearer ").removeprefix("token ")
        login = self.login_of(token)
        if login is None:
            return 401, {}, {"message": "Bad credentials"}
        with self._lock:
            limited = self._rate_limited()
            if limited:
                self.limited.append(recorded)
                return limited
            self.used += 1
            return self._route(method, split.path, query, token, body)

    def _take_failure(self, method: str) -> Failure | None:
        for i, failure in enumerate(self.failures):
            if failure.method in (None, method):
                return self.failures.pop(i)
        return None

    def rate_headers(self) -> dict[str, str]:
        now = self.clock()
        exhausted = self.primary_reset is not None and now < self.primary_reset
        reset = self.primary_reset if exhausted else now + 3600
        return {
            "x-ratelimit-limit": str(RATE_LIMIT),
            "x-ratelimit-remaining": "0" if exhausted else str(max(RATE_LIMIT - self.used, 0)),
            "x-ratelimit-used": str(RATE_LIMIT if exhausted else self.used),
            "x-ratelimit-reset": str(int(reset)),
            "x-ratelimit-resource": "core",
        }

    def _rate_limited(self):
        now = self.clock()
        if self.primary_reset is not None and now < self.primary_reset:
            return 403, {}, {"message": PRIMARY_MESSAGE, "documentation_url": DOCS}
        if self.secondary_until is not None and now < self.secondary_until:
            extra = {}
            if self.secondary_retry_after:
                extra["retry-after"] = str(int(self.secondary_until - now + 0.999))
            return 403, extra, {"message": SECONDARY_MESSAGE, "documentation_url": DOCS}
        return None

    def _route(self, method, path, query, token, body):
        parts = path.strip("/").split("/")
        if parts == ["user"] and method == "GET":
            if token in self.user_tokens:
                return 200, {}, {"login": self.login_of(token)}
            return 403, {}, {"message": INTEGRATION_403}
        if len(parts) >= 3 and parts[0] == "repos" and "/".join(parts[1:3]) in self.others:
            return self._other_repository(method, "/".join(parts[1:3]), parts[3:])
        if len(parts) < 3 or parts[0] != "repos" or "/".join(parts[1:3]) != self.repository:
            return 404, {}, {"message": "Not Found"}
        rest = parts[3:]
        if (answer := self._route_trust(method, rest, token)) is not None:
            return answer
        if rest[:1] == ["actions"] and method == "GET":
            return self._route_actions(rest[1:], query)
        if (answer := self._route_history(method, path, rest, query, token, body)) is not None:
            return answer
        writes = method in ("POST", "PATCH")
        if writes and token in self.fork_tokens:
            return 403, {}, {"message": INTEGRATION_403}
        if rest == [] and method == "GET":
            return 200, {}, {"full_name": self.repository, "default_branch": self.default_branch}
        if len(rest) == 2 and rest[0] == "compare" and method == "GET":
            return self._compare(unquote(rest[1]))
        if rest[:1] == ["pulls"] and rest[2:] == ["reviews"] and rest[1].isdigit() and method == "GET":
            return self._paged(path, self.reviews.get(int(rest[1]), []), query)
        if len(rest) == 2 and rest[0] == "pulls" and rest[1].isdigit() and method == "GET":
            pull = self.pulls.get(int(rest[1]))
            return (200, {}, pull) if pull else (404, {}, {"message": "Not Found"})
        if len(rest) == 3 and rest[0] == "issues" and rest[2] == "comments" and rest[1].isdigit():
            return self._issue_comments(method, path, int(rest[1]), query, token, body)
        if len(rest) == 3 and rest[:2] == ["issues", "comments"] and method == "PATCH":
            return self._edit_comment(rest[2], token, body)
        return 404, {}, {"message": "Not Found"}

    # -- actions runs and artifacts -------------------------------------------------------
    def _route_actions(self, rest: list[str], query: dict[str, list[str]]):
        if len(rest) == 3 and rest[0] == "workflows" and rest[2] == "runs":
            wanted = {key: query[param][0] for key, param in (
                ("head_sha", "head_sha"), ("event", "event"), ("head_branch", "branch"),
                ("status", "status")) if param in query}
            runs = [r for r in reversed(self.runs) if r["path"].endswith("/" + rest[1])
                    and all(r[key] == value for key, value in wanted.items())]
            per_page = min(int(query.get("per_page", ["30"])[0]), 100)
            page = int(query.get("page", ["1"])[0])
            chunk = runs[(page - 1) * per_page: page * per_page]
            return 200, {}, {"total_count": len(runs), "workflow_runs": chunk}
        if len(rest) == 3 and rest[0] == "runs" and rest[2] == "artifacts" and rest[1].isdigit():
            name = (query.get("name") or [None])[0]
            found = [a for a in self.artifacts.get(int(rest[1]), [])
                     if name is None or a["name"] == name]
            return 200, {}, {"total_count": len(found), "artifacts": found}
        if len(rest) == 3 and rest[0] == "artifacts" and rest[2] == "zip" and rest[1].isdigit():
            if int(rest[1]) not in self.blobs:
                return 404, {}, {"message": "Not Found"}
            port = self.url.rsplit(":", 1)[1]
            return 302, {"Location": f"http://{self.blob_host}:{port}/blob/{rest[1]}"}, {}
        return 404, {}, {"message": "Not Found"}

    # -- comments -------------------------------------------------------------------------
    def _issue_comments(self, method, path, issue, query, token, body):
        if method == "GET":
            return self._list(path, issue, query)
        if method != "POST":
            return 404, {}, {"message": "Not Found"}
        if invalid := _invalid_body(body):
            return invalid
        comment = self._add_comment(issue, body["body"], self.login_of(token) or "")
        if self.break_creates:
            return (502, {}, {"message": "Server Error"}) if self.break_creates.pop(0) == "502" else DROP
        return 201, {}, comment

    def _edit_comment(self, comment_id: str, token: str, body: Any):
        for comments in self.comments.values():
            for comment in comments:
                if str(comment["id"]) != comment_id:
                    continue
                if comment["user"]["login"] != self.login_of(token):  # as for an integration
                    return 403, {}, {"message": INTEGRATION_403}
                if invalid := _invalid_body(body):
                    return invalid
                comment["body"] = body["body"]
                return 200, {}, comment
        return 404, {}, {"message": "Not Found"}

    # -- environments and labels (gate trust) ---------------------------------------------
    def _route_trust(self, method: str, rest: list[str], token: str):
        """GET environments/{name}; GET issues/{n}/labels; DELETE issues/{n}/labels/{name}.
        None for any other path."""
        rest = [unquote(part) for part in rest]
        if len(rest) == 3 and rest[0] == "collaborators" and rest[2] == "permission" \
                and method == "GET":
            return self._permission(rest[1])
        if len(rest) == 2 and rest[0] == "environments" and method == "GET":
            env = self.environments.get(rest[1])
            return (200, {}, env) if env else (404, {}, {"message": "Not Found"})
        if len(rest) < 3 or rest[0] != "issues" or rest[2] != "labels" or not rest[1].isdigit():
            return None
        labels = self.labels.setdefault(int(rest[1]), [])
        if len(rest) == 3 and method == "GET":
            return 200, {}, [{"name": name} for name in labels]
        if len(rest) == 4 and method == "DELETE":
            if token in self.fork_tokens:
                return 403, {}, {"message": "Resource not accessible by integration"}
            if rest[3] not in labels:
                return 404, {}, {"message": "Label does not exist"}
            labels.remove(rest[3])
            return 200, {}, [{"name": name} for name in labels]
        return None

    def _permission(self, login: str):
        if login.casefold() in {g.casefold() for g in self.ghosts | self.unknown_users}:
            return 404, {}, {"message": "Not Found"}
        roles = {k.casefold(): v for k, v in self.permissions.items()}
        role = roles.get(login.casefold(), "read")
        legacy = {"maintain": "write", "triage": "read"}.get(role, role)
        return 200, {}, {"permission": legacy, "role_name": role,
                         "user": {"login": login, "type": "User"}}

    def _other_repository(self, method: str, name: str, rest: list[str]):
        repo = self.others[name]
        if rest == [] and method == "GET":
            return 200, {}, {"full_name": name, "default_branch": repo["default_branch"]}
        if len(rest) == 2 and rest[0] == "compare" and method == "GET":
            return self._compare(unquote(rest[1]), repo.get("branches", {}), set())
        return 404, {}, {"message": "Not Found"}

    # -- issues, dispatches, permissions (gate history) -----------------------------------
    def add_issue(self, title: str, body: str, login: str = GITHUB_ACTIONS,
                  state: str = "open") -> dict[str, Any]:
        with self._lock:
            return self._add_issue(title, body, login, state)

    def _add_issue(self, title: str, body: str, login: str, state: str = "open"):
        self._next_id += 1
        number = len(self.issues) + 1
        issue = {"id": self._next_id, "number": number, "title": title, "body": body,
                 "state": state, "state_reason": None,
                 "user": {"login": login, "type": "Bot" if login.endswith("[bot]") else "User"},
                 "html_url": f"https://github.com/{self.repository}/issues/{number}"}
        self.issues[number] = issue
        return issue

    def _route_history(self, method, path, rest, query, token, body):
        """issues (list, create, edit), workflow dispatches and collaborator permissions;
        None for any other path."""
        writes = method in ("POST", "PATCH")
        if rest == ["issues"] and method == "GET":
            state = query.get("state", ["open"])[0]
            items = [i for i in reversed(self.issues.values())
                     if state == "all" or i["state"] == state]
            return self._paged(path, items, query)
        if writes and token in self.fork_tokens and rest[:1] in (["issues"], ["actions"]):
            return 403, {}, {"message": INTEGRATION_403}
        if rest == ["issues"] and method == "POST":
            if not isinstance(body, dict) or not body.get("title"):
                return 422, {}, {"message": "Validation Failed",
                                 "errors": [{"field": "title", "code": "missing_field"}]}
            issue = self._add_issue(body["title"], body.get("body") or "",
                                    self.login_of(token) or "")
            if self.break_creates:  # applied, then answered 502 or not at all
                return (502, {}, {"message": "Server Error"}) \
                    if self.break_creates.pop(0) == "502" else DROP
            return 201, {}, issue
        if len(rest) == 2 and rest[0] == "issues" and rest[1].isdigit() and method == "PATCH":
            issue = self.issues.get(int(rest[1]))
            if issue is None:
                return 404, {}, {"message": "Not Found"}
            body = body if isinstance(body, dict) else {}
            if invalid := _invalid_body(body if "body" in body else {"body": ""}):
                return invalid
            for key in ("title", "body", "state", "state_reason"):
                if key in body:
                    issue[key] = body[key]
            return 200, {}, issue
        if (len(rest) == 4 and rest[:2] == ["actions", "workflows"] and rest[3] == "dispatches"
                and method == "POST"):
            declared = self.workflows.get(unquote(rest[2]))
            if declared is None:
                return 404, {}, {"message": "Not Found"}
            inputs = (body or {}).get("inputs") or {}
            extra = sorted(set(inputs) - declared)
            if extra or not (body or {}).get("ref"):
                return 422, {}, {"message": f"Unexpected inputs provided: {extra}"
                                 if extra else "Invalid request: ref is missing"}
            self.dispatches.append({"workflow": unquote(rest[2]), "ref": body["ref"],
                                    "inputs": dict(inputs)})
            return 204, {}, None
        if len(rest) == 3 and rest[0] == "collaborators" and rest[2] == "permission" \
                and method == "GET":
            login = unquote(rest[1])
            if login in self.unknown_users:
                return 404, {}, {"message": "Not Found"}
            permission = self.permissions.get(login, "none")
            return 200, {}, {"permission": permission, "role_name": permission,
                             "user": {"login": login, "type": "User"}}
        return None

    def _compare(self, basehead: str, branches: dict[str, list[str]] | None = None,
                 elsewhere: set[str] | None = None):
        branches = self.branches if branches is None else branches
        elsewhere = self.elsewhere if elsewhere is None else elsewhere
        base, sep, head = basehead.partition("...")
        history = branches.get(base)
        if not sep or history is None:
            return 404, {}, {"message": "Not Found"}
        if head in history:
            behind = len(history) - 1 - history.index(head)
            status = "identical" if behind == 0 else "behind"
            return 200, {}, {"status": status, "ahead_by": 0, "behind_by": behind,
                             "commits": [], "files": []}
        if head in elsewhere:
            return 200, {}, {"status": "diverged", "ahead_by": 1, "behind_by": 1,
                             "commits": [{"sha": head}], "files": []}
        return 404, {}, {"message": f"No commit found for SHA: {head}"}

    def _list(self, path: str, issue: int, query: dict[str, list[str]]):
        return self._paged(path, self.comments.get(issue, []), query)

    def _paged(self, path: str, items: list[dict[str, Any]], query: dict[str, list[str]]):
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = int(query.get("page", ["1"])[0])
        pages = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        base = self.link_base or self.url
        links = []
        if page < pages:
            links.append(f'<{base}{path}?per_page={per_page}&page={page + 1}>; rel="next"')
            links.append(f'<{base}{path}?per_page={per_page}&page={pages}>; rel="last"')
        headers = {"Link": ", ".join(links)} if links else {}
        return 200, headers, chunk


def _invalid_body(body: Any):
    """GitHub's 422 for a missing or too long comment body."""
    text = body.get("body") if isinstance(body, dict) else None
    if isinstance(text, str) and len(text) <= MAX_BODY:
        return None
    problem = "body is too long (maximum is 65536 characters)" if isinstance(text, str) \
        else "body wasn't supplied."
    return 422, {}, {
        "message": "Validation Failed",
        "errors": [{"resource": "IssueComment", "code": "custom", "field": "body",
                    "message": problem}],
        "documentation_url": "https://docs.github.com/rest/issues/comments#create-an-issue-comment",
    }


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGitHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        headers = {k.lower(): v for k, v in self.headers.items()}
        answer = self.fake.handle(self.command, self.path, headers, body)
        if answer is DROP:
            self.close_connection = True
            return
        status, extra, payload = answer
        raw_bytes = isinstance(payload, bytes)
        data = payload if raw_bytes else b"" if status == 204 else json.dumps(payload).encode()
        self.send_response(status)
        if raw_bytes:
            self.send_header("Content-Type", "application/zip")
        elif status != 204:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in {**self.fake.rate_headers(), **extra}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = _serve
    do_DELETE = _serve
