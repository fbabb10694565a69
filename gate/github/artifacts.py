"""The results an earlier run of one commit left: found through the REST API and unpacked,
for a rerun that continues that run's sequential test (gate.flows.ab_continue).

`GET /repos/{o}/{r}/actions/workflows/{file}/runs?head_sha=...` lists the runs of each
workflow at that commit, newest first; `GET .../actions/runs/{id}/artifacts?name=...` the
artifact of the newest run that has one; `GET .../actions/artifacts/{id}/zip` answers with a
redirect to a short-lived download URL on another host, fetched without the token (the token
goes to the API only: gate.github.client).

The archive was written by a job that ran the code under test: it is unpacked as untrusted
input (no absolute paths, no `..`, no links, at most MAX_FILES files and MAX_BYTES bytes), and
what is read from it later is validated like any results file.
"""

from __future__ import annotations

import io
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import requests

from gate.core.errors import GateError
from gate.github.client import GitHubClient, GitHubError

MAX_BYTES = 512 << 20
MAX_FILES = 5000


@dataclass(frozen=True, kw_only=True)
class EarlierRun:
    run_id: int
    url: str
    workflow: str
    artifact_id: int
    artifact: str


def find_earlier_run(client: GitHubClient, *, workflows: list[str], sha: str,
                     names: list[str]) -> EarlierRun | None:
    """The newest completed run of `workflows` at `sha` that kept an artifact named one of
    `names` (not expired), or None."""
    runs = []
    for workflow in workflows:
        path = f"/repos/{client.repository}/actions/workflows/{workflow}/runs"
        answer = client.request("GET", path, params={"head_sha": sha, "status": "completed",
                                                    "per_page": 50}).json()
        runs += [(workflow, r) for r in _items(answer, "workflow_runs", path)
                 if r.get("head_sha") == sha]
    runs.sort(key=lambda wr: str(wr[1].get("created_at", "")), reverse=True)
    for workflow, run in runs:
        path = f"/repos/{client.repository}/actions/runs/{int(run['id'])}/artifacts"
        for name in names:
            answer = client.request("GET", path, params={"name": name}).json()
            for artifact in _items(answer, "artifacts", path):
                if artifact.get("name") == name and not artifact.get("expired"):
                    return EarlierRun(run_id=int(run["id"]), url=str(run.get("html_url", "")),
                                      workflow=workflow, artifact_id=int(artifact["id"]),
                                      artifact=name)
    return None


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
