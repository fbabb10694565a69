"""`gate artifact fetch` against the local GitHub server: the newest run of this commit that
kept its results is found and unpacked; the download URL gets no token; an archive that would
write outside its folder is refused; no earlier run is a new test (found=false, exit 0)."""

from __future__ import annotations

import io
import stat
import zipfile

import pytest
from support.cli import gate_subprocess
from support.fake_github import TOKEN

from gate.core.errors import GateError
from gate.github.artifacts import unpack

SHA = "b" * 40


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


def fetch(fake, tmp_path, *extra: str):
    out_file = tmp_path / "github_output"
    proc = gate_subprocess(
        "artifact", "fetch", "--workflow", "gate-pr.yml", "--workflow", "gate-rerun.yml",
        "--name", "perf-gate-results", "--name", "perf-gate-rerun-results", "--sha", SHA,
        "--out", tmp_path / "earlier", *extra,
        env={**fake.job_env(TOKEN), "GITHUB_OUTPUT": str(out_file)})
    return proc, out_file.read_text() if out_file.exists() else ""


def test_the_newest_run_of_the_commit_that_kept_results_is_unpacked_without_a_token(fake, tmp_path):
    fake.add_run("gate-pr.yml", SHA, {"perf-gate-results": zipped({"ab-state.json": "old"})})
    fake.add_run("gate-pr.yml", "c" * 40, {"perf-gate-results": zipped({"ab-state.json": "x"})})
    newest = fake.add_run("gate-rerun.yml", SHA, {
        "perf-gate-rerun-results": zipped({"ab-state.json": "new", "head/results.json": "{}"})})
    fake.add_run("gate-pr.yml", SHA, {"perf-gate-comment": zipped({"gate-comment.json": "{}"})})
    proc, outputs = fetch(fake, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "earlier" / "ab-state.json").read_text() == "new"
    assert (tmp_path / "earlier" / "head" / "results.json").is_file()
    assert "found<<" in outputs and "\ntrue\n" in outputs and f"/runs/{newest}\n" in outputs
    blob = fake.requests_to("GET", "/blob/")
    assert blob and "authorization" not in blob[0].headers
    assert all(r.headers.get("authorization") == f"Bearer {TOKEN}"
               for r in fake.requests if r.path.startswith("/repos/"))


def test_no_earlier_run_is_a_new_test_not_an_error(fake, tmp_path):
    fake.add_run("gate-pr.yml", "c" * 40, {"perf-gate-results": zipped({"ab-state.json": "x"})})
    proc, outputs = fetch(fake, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "\nfalse\n" in outputs and not (tmp_path / "earlier").exists()
    assert "no earlier run" in proc.stderr


def test_an_archive_that_writes_outside_its_folder_is_refused(fake, tmp_path):
    fake.add_run("gate-pr.yml", SHA, {"perf-gate-results": zipped({"../../evil.sh": "x"})})
    proc, _ = fetch(fake, tmp_path)
    assert proc.returncode == 2 and "a path outside its folder" in proc.stderr
    assert not (tmp_path / "evil.sh").exists() and "Traceback" not in proc.stderr


def test_links_and_bad_arguments_are_refused(tmp_path):
    with pytest.raises(GateError, match="symbolic link"):
        unpack(zipped({"a.json": "{}"}, link="state.json"), tmp_path / "x")
    proc = gate_subprocess("artifact", "fetch", "--workflow", "x.yml", "--name", "n",
                           "--sha", "HEAD", "--out", tmp_path / "o")
    assert proc.returncode == 2 and "40-character" in proc.stderr
