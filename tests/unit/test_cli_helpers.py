"""tests/support/cli.py runs `gate` the way a user does, in process and as a child process,
and both read the same: exit code, stdout, stderr."""

from __future__ import annotations

import os

from support.cli import gate_env, gate_in_process
from support.paths import REPO_ROOT

from gate import __version__
from gate.core.errors import EXIT_BAD_INPUT


def test_in_process_captures_stdout_and_the_exit_code():
    proc = gate_in_process("--version")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"gate {__version__}\n", "")


def test_in_process_a_usage_error_is_exit_2_with_the_usage_on_stderr():
    proc = gate_in_process("compare", "--no-such-option")
    assert proc.returncode == EXIT_BAD_INPUT
    assert proc.stderr.startswith("usage: gate compare") and proc.stdout == ""


def test_in_process_a_gate_error_is_one_line_on_stderr(tmp_path):
    proc = gate_in_process("compare", tmp_path / "missing")
    assert proc.returncode == EXIT_BAD_INPUT
    assert proc.stderr.startswith("gate: error: ") and "Traceback" not in proc.stderr


def test_the_child_sees_this_checkout_and_not_the_ci_that_runs_the_tests(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_from_the_ci_running_the_tests")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = gate_env({"GITHUB_REPOSITORY": "octo/vllm"})
    assert "GITHUB_TOKEN" not in env and env["GITHUB_REPOSITORY"] == "octo/vllm"
    assert env["PYTHONPATH"].split(os.pathsep) == [str(REPO_ROOT), "/elsewhere"]
