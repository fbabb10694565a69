"""The results an earlier run of one commit left: found through the REST API and unpacked,
for a rerun that continues that run's sequential test (gate.flows.ab_continue).

`GET /repos/{o}/{r}/actions/workflows/{file}/runs?status=completed` lists each workflow's
completed runs, newest first (MAX_PAGES pages of 100). A run counts as an earlier test of the
commit only when the run is the workflow's own, started by a trigger whose file and title the
repository controls:

- its `event` is `pull_request_target` or `workflow_dispatch`, its `head_repository` is this
  repository and its `path` is the workflow's file under .github/workflows/;
- the measured commit is a whole word of its `display_title`, the title the workflow's own
  `run-name` gives it (gate-pr.yml, gate-matrix.yml: `... at <head sha>`; gate-rerun.yml:
  `perf-gate-rerun: <sha> ...`). The run's `head_sha` cannot say which commit was measured:
  for `pull_request_target` it is the base branch's commit, for a dispatch its branch's;
- that `head_sha` is a commit of the branch whose file is trusted (identical or behind in
  GitHub's compare): the default branch for `pull_request_target` (the PR workflows run on
  PRs into it only), the `dispatch_branch` for `workflow_dispatch` (the rerun's sandbox).
  The file, and so the `run-name` that wrote the title, is then that branch's, reviewed: a
  copy of the workflow on another branch (a PR into a branch of a writer's, a dispatch of a
  branch's copy) could write any title and upload any artifact, and is never taken.

`GET .../actions/runs/{id}/artifacts?name=...` gives the artifact of the newest run that has
one; `GET .../actions/artifacts/{id}/zip` answers with a redirect to a short-lived download
URL on another host, fetched without the token (the token goes to the API only:
gate.github.client).

The archive was written by a job that ran the code under test: it is unpacked as untrusted
input (no absolute paths, no `..`, no links, at most MAX_FILES files and MAX_BYTES bytes), and
what is read from it later is validated like any results file.
"""

from __future__ import annotations

import io
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

import requests

from gate.core.errors import GateError
from gate.github.client import GitHubClient, GitHubError, GitHubForbidden
from gate.github.trust import default_branch

MAX_BYTES = 512 << 20
MAX_FILES = 5000
MAX_PAGES = 5  # of 100 completed runs per workflow, newest first
# The triggers whose workflow file (and so whose run-name) a branch of this repository
# chooses, never a fork's or a PR's copy.
TRUSTED_EVENTS = ("pull_request_target", "workflow_dispatch")


@dataclass(frozen=True, kw_only=True)
class EarlierRun:
    run_id: int
    url: str
    workflow: str
    artifact_id: int
    artifact: str


def find_earlier_run(client: GitHubClient, *, workflows: list[str], sha: str,
                     names: list[str], dispatch_branch: str | None = None) -> EarlierRun | None:
    """The newest completed run of `workflows` that measured `sha` (see the module's
    docstring for what counts) and kept an artifact named one of `names` (not expired), or
    None. `dispatch_branch`: the branch a `workflow_dispatch` run must have run from (default:
    the default branch)."""
    default = default_branch(client)
    trusted = {"pull_request_target": default, "workflow_dispatch": dispatch_branch or default}
    runs = []
    for workflow in workflows:
        runs += [(workflow, r) for r in _completed_runs(client, workflow)
                 if _measured(r, client.repository, workflow, sha)]
    runs.sort(key=lambda wr: str(wr[1].get("created_at", "")), reverse=True)
    on_branch: dict[tuple[str, str], bool] = {}
    for workflow, run in runs:
        branch, base = trusted[run["event"]], str(run.get("head_sha", ""))
        if (branch, base) not in on_branch:
            on_branch[branch, base] = _on_branch(client, base, branch)
        if not on_branch[branch, base]:
            continue
        path = f"/repos/{client.repository}/actions/runs/{int(run['id'])}/artifacts"
        for name in names:
            answer = client.request("GET", path, params={"name": name}).json()
            for artifact in _items(answer, "artifacts", path):
                if artifact.get("name") == name and not artifact.get("expired"):
                    return EarlierRun(run_id=int(run["id"]), url=str(run.get("html_url", "")),
                                      workflow=workflow, artifact_id=int(artifact["id"]),
                                      artifact=name)
    return None


def _completed_runs(client: GitHubClient, workflow: str) -> list[dict[str, Any]]:
    path = f"/repos/{client.repository}/actions/workflows/{workflow}/runs"
    runs: list[dict[str, Any]] = []
    for page in range(1, MAX_PAGES + 1):
        answer = client.request("GET", path, params={"status": "completed", "per_page": 100,
                                                    "page": page}).json()
        items = _items(answer, "workflow_runs", path)
        runs += items
        if len(items) < 100:
            break
    return runs


def _measured(run: dict[str, Any], repository: str, workflow: str, sha: str) -> bool:
    """Whether `run` is `workflow`'s own run, by a trigger whose file the repository chooses,
    whose title names `sha` (the branch its file came from is checked by the caller)."""
    head_repository = run.get("head_repository")
    title = run.get("display_title")
    return (run.get("event") in TRUSTED_EVENTS
            and isinstance(head_repository, dict)
            and head_repository.get("full_name") == repository
            and run.get("path") == f".github/workflows/{workflow}"
            and isinstance(title, str)
            and re.search(rf"(?<![0-9A-Za-z]){re.escape(sha)}(?![0-9A-Za-z])", title) is not None
            and isinstance(run.get("id"), int))


def _on_branch(client: GitHubClient, sha: str, branch: str) -> bool:
    """Whether `sha` is `branch`'s tip or an older commit of it (GitHub's compare API)."""
    if not re.fullmatch(r"[0-9a-f]{40}", sha):
        return False
    path = f"/repos/{client.repository}/compare/{quote(branch, safe='')}...{sha}"
    try:
        status = client.request("GET", path).json().get("status")
    except GitHubForbidden as exc:
        if exc.status == 404:  # not a commit of this repository
            return False
        raise
    return status in ("identical", "behind")


def _items(answer: Any, key: str, path: str) -> list[dict[str, Any]]:
    items = answer.get(key) if isinstance(answer, dict) else None
    if not isinstance(items, list):
        raise GitHubError(f"GitHub API GET {path}: expected an object with a list {key!r}")
    return [i for i in items if isinstance(i, dict)]


def download(client: GitHubClient, earlier: EarlierRun, dest: Path) -> list[str]:
    """Unpack the earlier run's artifact into `dest`; the files written."""
    path = f"/repos/{client.repository}/actions/artifacts/{earlier.artifact_id}/zip"
    resp = client.request("GET", path, allow_redirects=False)
    location = resp.headers.get("location")
    if resp.status_code in (301, 302, 303, 307, 308) and location:
        try:  # a plain request: the signed URL needs no token, and gets none
            resp = requests.get(location, timeout=client.timeout_s, stream=True)
            resp.raise_for_status()
        except requests.RequestException as exc:
            raise GitHubError(f"downloading artifact {earlier.artifact}: {exc}") from None
    data = _read_capped(resp)
    return unpack(data, dest)


def _read_capped(resp: requests.Response) -> bytes:
    chunks, size = [], 0
    for chunk in resp.iter_content(1 << 16):
        size += len(chunk)
        if size > MAX_BYTES:
            raise GateError(f"the artifact is over {MAX_BYTES >> 20} MiB: not unpacked")
        chunks.append(chunk)
    return b"".join(chunks)


def unpack(data: bytes, dest: Path) -> list[str]:
    """A zip archive into `dest`, refusing what could write outside it or fill the disk."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise GateError("the artifact is not a zip archive") from None
    entries = archive.infolist()
    if len(entries) > MAX_FILES or sum(e.file_size for e in entries) > MAX_BYTES:
        raise GateError(f"the artifact holds over {MAX_FILES} files or {MAX_BYTES >> 20} MiB")
    written = []
    for entry in entries:
        name = PurePosixPath(entry.filename)
        if name.is_absolute() or ".." in name.parts or "\\" in entry.filename:
            raise GateError(f"the artifact holds a path outside its folder: {entry.filename!r}")
        if stat.S_ISLNK(entry.external_attr >> 16):
            raise GateError(f"the artifact holds a symbolic link: {entry.filename!r}")
        target = dest.joinpath(*name.parts)
        if entry.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(archive.read(entry))
        written.append(str(name))
    return written
