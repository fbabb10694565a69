"""A real HTTP server on 127.0.0.1 that speaks the GitHub REST endpoints the gate calls.

Endpoints: GET/POST /repos/{o}/{r}/issues/{n}/comments (per_page, page, Link headers),
PATCH /repos/{o}/{r}/issues/comments/{id}, GET /repos/{o}/{r}, GET /repos/{o}/{r}/pulls/{n},
GET /user. Tokens come from the Authorization header:

- `good_tokens` may do everything; `user_tokens` also answer GET /user (a PAT), the others get
  403 there like GITHUB_TOKEN does;
- `fork_tokens` may read but get 403 "Resource not accessible by integration" on writes;
- anything else gets 401.

Failures to inject, consumed in order per request: `fail_next(status, times, headers, body)`,
e.g. 502 twice, 429 with Retry-After, 403 with x-ratelimit-remaining: 0.

Environments and labels (`gate trust`): GET /repos/{o}/{r}/environments/{name} answers from
`environments`; GET /repos/{o}/{r}/issues/{n}/labels and DELETE .../labels/{name} use `labels`.

Every request is recorded (method, path, query, headers, body) for assertions.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


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


class FakeGitHub:
    def __init__(self, repository: str = "octo/vllm", *, login: str = "gate-bot"):
        self.repository = repository
        self.login = login
        self.good_tokens: set[str] = {"good-token"}
        self.user_tokens: set[str] = set()
        self.fork_tokens: set[str] = {"fork-token"}
        self.comments: dict[int, list[dict[str, Any]]] = {}
        self.pulls: dict[int, dict[str, Any]] = {}
        self.environments: dict[str, dict[str, Any]] = {}  # name -> GitHub's environment JSON
        self.labels: dict[int, list[str]] = {}  # issue/PR number -> label names
        self.requests: list[Recorded] = []
        self.failures: list[Failure] = []
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

    def requests_to(self, method: str, fragment: str = "") -> list[Recorded]:
        return [r for r in self.requests if r.method == method and fragment in r.path]

    # -- request handling, called by the handler ------------------------------------------
    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: Any):
        split = urlsplit(raw_path)
        query = parse_qs(split.query)
        with self._lock:
            self.requests.append(Recorded(method, split.path, query, headers, body))
            failure = self._take_failure(method)
        if failure:
            return failure.status, failure.headers, failure.body
        token = headers.get("authorization", "").removeprefix("Bearer ").removeprefix("token ")
        if token not in self.good_tokens | self.fork_tokens | self.user_tokens:
            return 401, {}, {"message": "Bad credentials"}
        with self._lock:
            return self._route(method, split.path, query, token, body)

    def _take_failure(self, method: str) -> Failure | None:
        for i, failure in enumerate(self.failures):
            if failure.method in (None, method):
                return self.failures.pop(i)
        return None

    def _route(self, method, path, query, token, body):
        parts = path.strip("/").split("/")
        if parts == ["user"] and method == "GET":
            if token in self.user_tokens:
                return 200, {}, {"login": self.login}
            return 403, {}, {"message": "Resource not accessible by integration"}
        if len(parts) < 3 or parts[0] != "repos" or "/".join(parts[1:3]) != self.repository:
            return 404, {}, {"message": "Not Found"}
        rest = parts[3:]
        if (answer := self._route_trust(method, rest, token)) is not None:
            return answer
        writes = method in ("POST", "PATCH")
        if writes and token in self.fork_tokens:
            return 403, {}, {"message": "Resource not accessible by integration"}
        if rest == [] and method == "GET":
            return 200, {}, {"full_name": self.repository}
        if len(rest) == 2 and rest[0] == "pulls" and rest[1].isdigit() and method == "GET":
            pull = self.pulls.get(int(rest[1]))
            return (200, {}, pull) if pull else (404, {}, {"message": "Not Found"})
        if len(rest) == 3 and rest[0] == "issues" and rest[2] == "comments" and rest[1].isdigit():
            issue = int(rest[1])
            if method == "GET":
                return self._list(path, issue, query)
            if method == "POST":
                return 201, {}, self._add_comment(issue, body["body"], self.login + "[bot]")
        if len(rest) == 3 and rest[:2] == ["issues", "comments"] and method == "PATCH":
            for comments in self.comments.values():
                for comment in comments:
                    if str(comment["id"]) == rest[2]:
                        comment["body"] = body["body"]
                        return 200, {}, comment
            return 404, {}, {"message": "Not Found"}
        return 404, {}, {"message": "Not Found"}

    # -- environments and labels (gate trust) ---------------------------------------------
    def _route_trust(self, method: str, rest: list[str], token: str):
        """GET environments/{name}; GET issues/{n}/labels; DELETE issues/{n}/labels/{name}.
        None for any other path."""
        rest = [unquote(part) for part in rest]
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

    def _list(self, path: str, issue: int, query: dict[str, list[str]]):
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = int(query.get("page", ["1"])[0])
        items = self.comments.get(issue, [])
        pages = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []
        if page < pages:
            links.append(f'<{self.url}{path}?per_page={per_page}&page={page + 1}>; rel="next"')
            links.append(f'<{self.url}{path}?per_page={per_page}&page={pages}>; rel="last"')
        headers = {"Link": ", ".join(links)} if links else {}
        return 200, headers, chunk


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
        status, extra, payload = self.fake.handle(self.command, self.path, headers, body)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = _serve
    do_DELETE = _serve
