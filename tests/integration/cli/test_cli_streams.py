"""What the gate prints, read as a GitHub runner reads it, from real subprocesses: untrusted
text never becomes a workflow command, and a closed pipe never changes a command's exit code."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest
from support.action_runner import runner_commands
from support.calibrations import store_for
from support.cli import gate_command, gate_env, gate_subprocess
from support.factories import drain_results, results_folder
from support.gitrepo import commit, init


def test_json_key_name_in_an_error_prints_no_command(tmp_path):
    bad = tmp_path / "verdict.json"
    bad.write_text(json.dumps({"outcome": "pass", "\n::error title=Perf gate::PASS": 1}))
    results = results_folder(tmp_path / "head", drain_results([233.0]))
    proc = gate_subprocess("report", "--verdict", bad, "--head", results)
    assert proc.returncode == 2, proc.stderr
    assert "::error title=Perf gate::PASS" in proc.stderr  # shown, as text
    assert runner_commands(proc.stdout + proc.stderr) == []


def test_watched_file_named_like_a_command_prints_no_command(tmp_path):
    repo = init(tmp_path / "vllm")
    commit(repo, "base", {"vllm/v1/structured_output/utils.py": "x = 1\n"})
    evil = "vllm/v1/structured_output/evil name\n::warning title=Perf gate::pin_memory.py"
    commit(repo, "head", {evil: "y = torch.full((3,), -1).pin_memory()\n"})
    proc = gate_subprocess("hunks", "--repo", repo, "--base", "HEAD~1", "--head", "HEAD")
    assert proc.returncode == 0, proc.stderr
    assert "pin_memory" in proc.stderr
    assert runner_commands(proc.stdout + proc.stderr) == []


@pytest.mark.parametrize(("head", "code"), [([233.0], 0), ([121.0], 1)])
def test_closed_pipe_keeps_the_verdicts_exit_code(tmp_path, head, code):
    for name, figures in (("head", head), ("base", [233.0])):
        results_folder(tmp_path / name, drain_results(figures))
    store_for(tmp_path / "noise", drain_results([233.0]))  # the runner's calibration
    gate = shlex.join(gate_command("compare", "head", "--against", "base", "--noise-dir", "noise"))
    script = f'{gate} | head -c 1 > /dev/null; echo "${{PIPESTATUS[0]}}"'
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env=gate_env({"GATE_CACHE_DIR": str(tmp_path / "cache")}), timeout=120)
    assert proc.stdout.strip() == str(code), proc.stderr
    assert "BrokenPipeError" not in proc.stderr and "Traceback" not in proc.stderr
