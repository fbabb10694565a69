"""`gate bisect` on bad input, as a subprocess: each mistake is named, exits 2, prints no
traceback, and starts no server. (A bisect that measures runs in tests/e2e.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.bisect_repo import BACKEND, install_package, make_repo, stand_in_python
from support.cli import gate_subprocess

from gate.evidence.bisect_record import BisectState, CommitInfo
from gate.runner.commit_build import InstalledBuild


def gate(*args: str) -> subprocess.CompletedProcess:
    return gate_subprocess("bisect", *args, timeout=120)


@pytest.fixture
def repo(tmp_path):
    installed = install_package(tmp_path)
    path, shas = make_repo(tmp_path, [(f"c{i}", {BACKEND: f"X = {i}\n"}) for i in range(1, 4)])
    return path, shas, stand_in_python(tmp_path, installed)


@pytest.mark.parametrize(("args", "said"), [
    ([], "gate bisect needs --good and --bad, or --hunks --head"),
    (["--good", "HEAD~2"], "gate bisect needs --good and --bad"),
    (["--hunks", "--head", "HEAD", "--good", "HEAD~1"], "--hunks --head takes one change, not "
     "--good"),
    (["--hunks"], "--hunks needs --head, or --good and --bad"),
    (["--hunks", "--good", "HEAD~1"], "--hunks needs --head, or --good and --bad"),
    (["--hunks", "--base", "HEAD~1"], "--base needs --head"),
    (["--good", "HEAD~2", "--bad", "HEAD", "--head", "HEAD"], "--head and --base go with "
     "--hunks"),
    (["--good", "HEAD~2", "--bad", "HEAD", "--step-attempts", "0"],
     "--step-attempts must be at least 1"),
    (["--good", "HEAD~2", "--bad", "nope"], "git ref 'nope' does not exist"),
    (["--good", "HEAD", "--bad", "HEAD~2"], "no commit between good"),
    (["--good", "HEAD~2", "--bad", "HEAD", "--plan", "no-such-plan"],
     "plan 'no-such-plan' is neither a file nor a built-in plan"),
    (["--good", "HEAD~2", "--bad", "HEAD", "--threshold", "nonsense=1"],
     "unknown threshold 'nonsense'"),
])
def test_bad_input_is_named_without_a_traceback(repo, tmp_path, args, said):
    path, _, python = repo
    proc = gate("--repo", str(path), "--python", python, "--out", str(tmp_path / "out"), *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr


def test_a_folder_that_is_not_a_repository_is_named(tmp_path):
    proc = gate("--repo", str(tmp_path), "--good", "a", "--bad", "b", "--out",
                str(tmp_path / "out"))
    assert proc.returncode == 2 and "does not exist in" in proc.stderr


def test_an_out_folder_of_another_bisect_is_refused_and_left_as_it_was(repo, tmp_path):
    path, shas, python = repo
    out = tmp_path / "out"
    other = BisectState(repo=str(path.resolve()), good=CommitInfo(sha=shas[1]),
                        bad=CommitInfo(sha=shas[3]), plan_hash="x", commits=[],
                        builds=[InstalledBuild(commit=shas[1], python=python, package_dir="/")])
    out.mkdir()
    (out / "bisect-state.json").write_text(other.model_dump_json())
    before = (out / "bisect-state.json").read_text()
    proc = gate("--repo", str(path), "--python", python, "--good", shas[0], "--bad", shas[3],
                "--out", str(out))
    assert proc.returncode == 2 and "holds another bisect (good:" in proc.stderr
    assert (out / "bisect-state.json").read_text() == before
    assert sorted(p.name for p in Path(out).iterdir()) == ["bisect-state.json"]
