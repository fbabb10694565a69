"""`gate profile` on the command line: bad inputs are named, a diff writes every artifact."""

from __future__ import annotations

from support.cli import gate_subprocess
from support.profiles import SLOW, make_profile, steady

from gate.core.errors import EXIT_BAD_INPUT
from gate.profile.data import save_build_profile


def test_profile_commands_refuse_bad_input_and_write_nothing(tmp_path):
    save_build_profile(make_profile("base", steady(20)), tmp_path / "base")
    proc = gate_subprocess("profile", "diff", str(tmp_path / "base"), str(tmp_path / "nope"),
                    "--out", str(tmp_path / "out"))
    assert proc.returncode == EXIT_BAD_INPUT
    assert proc.stderr.startswith("gate: error: profile file ") and "does not exist" in proc.stderr
    proc = gate_subprocess("profile", "diff", str(tmp_path / "base"), str(tmp_path / "base"),
                    "--out", str(tmp_path / "out"), "--confidence", "1.5")
    assert proc.returncode == EXIT_BAD_INPUT and "confidence: Input should be less than 1" in proc.stderr
    assert not (tmp_path / "out").exists()
    proc = gate_subprocess("profile", "record", "--base-url", "http://127.0.0.1:9", "--out",
                    str(tmp_path / "rec"), "--windows", "1")
    assert proc.returncode == EXIT_BAD_INPUT and "at least 2 windows" in proc.stderr
    proc = gate_subprocess("profile", "record", "--base-url", "http://127.0.0.1:9", "--out",
                    str(tmp_path / "rec"))
    assert proc.returncode == EXIT_BAD_INPUT and "cannot reach a vLLM server" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "rec").exists()


def test_profile_diff_cli_writes_every_artifact(tmp_path):
    save_build_profile(make_profile("base", steady(20)), tmp_path / "base")
    save_build_profile(make_profile("head", steady(80)), tmp_path / "head")
    proc = gate_subprocess("profile", "diff", str(tmp_path / "base"), str(tmp_path / "head"),
                    "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("2 function(s) differ beyond noise")  # + its caller
    assert SLOW.split(":")[1] in proc.stdout.splitlines()[3]
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert names == {"profile-diff.json", "profile-diff.txt", "diff.folded",
                     "diff-flamegraph.svg", "where-time.md"}
