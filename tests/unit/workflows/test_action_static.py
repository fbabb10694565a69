"""action.yml read as a file (no markdown or JSON built in shell), the test interpreter's
reading of GITHUB_OUTPUT, and `gate verdict --error`, the command action.yml falls back on
(integration/test_action.py runs action.yml itself)."""

from __future__ import annotations

import json
import re

import yaml
from support.action_runner import parse_output_file
from support.cli import gate_in_process
from support.expressions import Evaluator
from support.paths import REPO_ROOT


def test_no_markdown_or_json_is_built_in_shell_or_inline_python():
    action = yaml.safe_load((REPO_ROOT / "action.yml").read_text())
    for step in action["runs"]["steps"]:
        script = step.get("run", "")
        assert "printf" not in script, step["name"]
        assert not re.search(r"python3?\s+-(c\b|\s|$)", script), step["name"]
        assert not re.search(r"<<-?\s*['\"]?\w", script), step["name"]  # no heredoc (<<< is ok)
        assert not re.search(r"^\s*echo\s+['\"][{#*|-]", script, re.M), step["name"]


def test_interpreter_reads_heredoc_outputs():
    text = "a=1\nb<<ghadelimiter_x\nline1\nline2\nghadelimiter_x\nc=x=y\n"
    assert parse_output_file(text) == {"a": "1", "b": "line1\nline2", "c": "x=y"}


def test_verdict_error_command_writes_once_and_exits_4(tmp_path):
    out = tmp_path / "verdict.json"
    proc = gate_in_process("verdict", "--error", "head results missing", "--mode", "ab",
                           "--out", out)
    assert proc.returncode == 4
    written = json.loads(out.read_text())
    assert written["outcome"] == "error" and written["mode"] == "ab"
    assert written["headline"] == "ERROR: head results missing"
    assert written["errors"] == ["head results missing"]
    proc = gate_in_process("verdict", "--error", "again", "--out", out)
    assert proc.returncode == 2 and "never replaces a verdict" in proc.stderr
    assert json.loads(out.read_text()) == written


def test_the_results_artifact_is_kept_a_week_unless_the_workflow_says_otherwise():
    """L10: on a public repository any signed-in user can download the results artifact; it
    is kept 7 days by default (the rerun's continuation needs it only that long)."""
    action = yaml.safe_load((REPO_ROOT / "action.yml").read_text())
    (upload,) = [s for s in action["runs"]["steps"] if s.get("name") == "Upload the results"]
    defaults = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
    kept = Evaluator({"inputs": defaults}).interpolate(str(upload["with"]["retention-days"]))
    assert kept == "7"
    given = {**defaults, "retention-days": "30"}
    assert Evaluator({"inputs": given}).interpolate(upload["with"]["retention-days"]) == "30"
