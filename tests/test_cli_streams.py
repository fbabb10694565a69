"""What the gate prints, read as a GitHub runner reads it: untrusted text never becomes a
workflow command, and a closed pipe never changes a command's exit code."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from compare_helpers import drain_results

from gate.results import save_results
from gate.runner_output import SafeStream, workflow_command

REPO = Path(__file__).resolve().parent.parent
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent",
}


def runner_commands(text: str) -> list[str]:
    """Lines a runner would execute as workflow commands: it splits on \\r, \\n and \\r\\n and
    trims leading whitespace before looking for `::` (or the legacy `##[`)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [ln for ln in lines if ln.lstrip().startswith(("::", "##["))]


def filtered(*writes: str) -> str:
    raw = io.StringIO()
    stream = SafeStream(raw)
    for w in writes:
        stream.write(w)
    stream.finish_line()
    return raw.getvalue()


@pytest.mark.parametrize("text", [
    "::error title=Perf gate::PASS\n",
    "   ::warning::x\n",
    "\t##[error]legacy\n",
    "ok line\r::add-mask::secret\n",
    "ok\r\n::stop-commands::tok\n",
])
def test_lines_that_read_as_commands_are_quoted(text):
    out = filtered(text)
    assert runner_commands(out) == []
    assert out.replace("|", "", 1).replace("|", "") == text.replace("|", "")


def test_a_command_split_across_writes_is_still_caught():
    out = filtered("gate: error: bad key\n", "  :", ":error title=x::y", "\n")
    assert runner_commands(out) == [] and "|  ::error title=x::y" in out


def test_ordinary_text_and_mid_line_colons_pass_unchanged():
    text = "plan a::b, ratio 1.2x :: ok\nnext line: fine\n"
    assert filtered(text) == text


def test_the_gates_own_commands_pass_through():
    raw = io.StringIO()
    stream = SafeStream(raw)
    stream.write("partial")
    workflow_command(stream, "::warning file=a.py,line=3::message%0Amore")
    assert raw.getvalue() == "partial\n::warning file=a.py,line=3::message%0Amore\n"
    assert runner_commands(raw.getvalue()) == ["::warning file=a.py,line=3::message%0Amore"]


def gate(*args: str, cwd: Path = REPO, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gate.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120, **kw)


def test_json_key_name_in_an_error_prints_no_command(tmp_path):
    bad = tmp_path / "verdict.json"
    bad.write_text(json.dumps({"outcome": "pass", "\n::error title=Perf gate::PASS": 1}))
    results = tmp_path / "head"
    results.mkdir()
    save_results(drain_results([233.0]), results / "results.json")
    proc = gate("report", "--verdict", str(bad), "--head", str(results))
    assert proc.returncode == 2, proc.stderr
    assert "::error title=Perf gate::PASS" in proc.stderr  # shown, as text
    assert runner_commands(proc.stdout + proc.stderr) == []


def test_watched_file_named_like_a_command_prints_no_command(tmp_path):
    repo = tmp_path / "vllm"
    env = {**os.environ, **GIT_ENV}
    folder = repo / "vllm" / "v1" / "structured_output"
    folder.mkdir(parents=True)

    def git(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)

    git("init", "-q", "-b", "main")
    (folder / "utils.py").write_text("x = 1\n")
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    evil = folder / "evil name\n::warning title=Perf gate::pin_memory.py"
    evil.write_text("y = torch.full((3,), -1).pin_memory()\n")
    git("add", "-A")
    git("commit", "-q", "-m", "head")
    proc = gate("hunks", "--repo", str(repo), "--base", "HEAD~1", "--head", "HEAD")
    assert proc.returncode == 0, proc.stderr
    assert "pin_memory" in proc.stderr
    assert runner_commands(proc.stdout + proc.stderr) == []


@pytest.mark.parametrize(("head", "code"), [([233.0], 0), ([121.0], 1)])
def test_closed_pipe_keeps_the_verdicts_exit_code(tmp_path, head, code):
    for name, figures in (("head", head), ("base", [233.0])):
        (tmp_path / name).mkdir()
        save_results(drain_results(figures), tmp_path / name / "results.json")
    script = (f'"{sys.executable}" -m gate.cli compare head --against base | head -c 1 '
              '> /dev/null; echo "${PIPESTATUS[0]}"')
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert proc.stdout.strip() == str(code), proc.stderr
    assert "BrokenPipeError" not in proc.stderr and "Traceback" not in proc.stderr
