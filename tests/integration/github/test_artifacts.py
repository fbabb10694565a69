"""`gate artifact fetch` against the local GitHub server: the newest run of this commit that
kept its results is found and unpacked; only the workflows' own runs count (their
`pull_request_target` runs of the default branch's file, their dispatches on the sandbox
branch, whose title names the commit), never a fork's `pull_request` run or a copy of the
workflow on another branch; the download URL gets no token; an archive that would write
outside its folder is refused; no earlier run is a new test (found=false, exit 0)."""

from __future__ import annotations

import io
import stat
import zipfile

import pytest
from support.cli import gate_subprocess
from support.fake_github import TOKEN
from support.workflow_steps import resolve
from support.workflows import load

from gate.core.errors import GateError
from gate.github.artifacts import unpack

SHA = "b" * 40
SANDBOX = "perf-gate/sandbox"


def zipped(files: dict[str, str], link: str | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        if link is not None:
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
    return buf.getvalue()


def title(workflow: str, sha: str, pr: int = 12) -> str:
    """The run's title as GitHub shows it: the shipped workflow's run-name, evaluated."""
    event = {"action": "labeled", "pull_request": {"number": pr, "head": {"sha": sha}}}
    context = {"github": {"event": event}, "inputs": {"sha": sha, "pr": str(pr)}}
    return resolve(context, load(workflow)["run-name"])


def pr_run(fake, sha: str, artifacts: dict[str, bytes], **kw) -> int:
    return fake.add_run("gate-pr.yml", title("gate-pr.yml", sha), artifacts, **kw)


def rerun(fake, sha: str, artifacts: dict[str, bytes], branch: str = SANDBOX,
          event: str = "workflow_dispatch") -> int:
    return fake.add_run("gate-rerun.yml", title("gate-rerun.yml", sha), artifacts,
                        event=event, branch=branch)


def fetch(fake, tmp_path, *extra: str):
    out_file = tmp_path / "github_output"
    proc = gate_subprocess(
        "artifact", "fetch", "--workflow", "gate-pr.yml", "--workflow", "gate-rerun.yml",
        "--name", "perf-gate-results", "--name", "perf-gate-rerun-results", "--sha", SHA,
        "--out", tmp_path / "earlier", "--dispatch-branch", SANDBOX, *extra,
        env={**fake.job_env(TOKEN), "GITHUB_OUTPUT": str(out_file)})
    return proc, out_file.read_text() if out_file.exists() else ""


def test_the_titles_name_the_measured_commit_and_the_runs_head_sha_does_not(fake):
    assert title("gate-pr.yml", SHA) == f"perf-gate: PR #12 labeled at {SHA}"
    assert title("gate-rerun.yml", SHA) == f"perf-gate-rerun: {SHA} (PR #12)"
    pr_run(fake, SHA, {})
    (run,) = fake.runs
    assert run["head_sha"] == fake.branches["main"][-1] != SHA  # the base branch's commit


def test_the_newest_run_of_the_commit_that_kept_results_is_unpacked_without_a_token(fake, tmp_path):
    pr_run(fake, SHA, {"perf-gate-results": zipped({"ab-state.json": "old"})})
    pr_run(fake, "c" * 40, {"perf-gate-results": zipped({"ab-state.json": "x"})})
    newest = rerun(fake, SHA, {
        "perf-gate-rerun-results": zipped({"ab-state.json": "new", "head/results.json": "{}"})})
    pr_run(fake, SHA, {"perf-gate-comment": zipped({"gate-comment.json": "{}"})})
    fake.branches["main"].append("d" * 40)  # main moved on since: its runs' files were main's
    proc, outputs = fetch(fake, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "earlier" / "ab-state.json").read_text() == "new"
    assert (tmp_path / "earlier" / "head" / "results.json").is_file()
    assert "found<<" in outputs and "\ntrue\n" in outputs and f"/runs/{newest}\n" in outputs
    blob = fake.requests_to("GET", "/blob/")
    assert blob and "authorization" not in blob[0].headers
    assert all(r.headers.get("authorization") == f"Bearer {TOKEN}"
               for r in fake.requests if r.path.startswith("/repos/"))


def test_a_run_the_repository_did_not_title_is_never_the_earlier_test(fake, tmp_path):
    """N2: newer runs whose title names the commit, but whose workflow file a fork or a
    writer's branch chose (and so could title, and upload, anything), are passed over for
    the workflows' own older run."""
    own = pr_run(fake, SHA, {"perf-gate-results": zipped({"ab-state.json": "own"})})
    forged = {"perf-gate-results": zipped({"ab-state.json": "forged"}),
              "perf-gate-rerun-results": zipped({"ab-state.json": "forged"})}
    fake.branches["evil"] = ["e" * 40]  # a writer's branch with its own copy of gate-pr.yml
    pr_run(fake, SHA, forged, event="pull_request", repository="mallory/vllm")  # a fork's copy
    pr_run(fake, SHA, forged, repository="mallory/vllm")
    pr_run(fake, SHA, forged, branch="evil")  # a PR into the writer's branch
    rerun(fake, SHA, forged, branch="wip")  # a dispatch of another branch's copy
    rerun(fake, SHA, forged, event="push", branch="main")  # another trigger of it
    proc, outputs = fetch(fake, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "earlier" / "ab-state.json").read_text() == "own"
    assert f"/runs/{own}\n" in outputs


def test_no_earlier_run_is_a_new_test_not_an_error(fake, tmp_path):
    pr_run(fake, "c" * 40, {"perf-gate-results": zipped({"ab-state.json": "x"})})
    proc, outputs = fetch(fake, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "\nfalse\n" in outputs and not (tmp_path / "earlier").exists()
    assert "no earlier run" in proc.stderr


def test_an_archive_that_writes_outside_its_folder_is_refused(fake, tmp_path):
    pr_run(fake, SHA, {"perf-gate-results": zipped({"../../evil.sh": "x"})})
    proc, _ = fetch(fake, tmp_path)
    assert proc.returncode == 2 and "a path outside its folder" in proc.stderr
    assert not (tmp_path / "evil.sh").exists() and "Traceback" not in proc.stderr


def test_links_and_bad_arguments_are_refused(tmp_path):
    with pytest.raises(GateError, match="symbolic link"):
        unpack(zipped({"a.json": "{}"}, link="state.json"), tmp_path / "x")
    proc = gate_subprocess("artifact", "fetch", "--workflow", "x.yml", "--name", "n",
                           "--sha", "HEAD", "--out", tmp_path / "o")
    assert proc.returncode == 2 and "40-character" in proc.stderr
