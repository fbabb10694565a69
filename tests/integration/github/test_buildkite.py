"""The report as a Buildkite annotation (gate.github.buildkite, `gate buildkite annotate`),
against a stand-in `buildkite-agent` on PATH that records what it was asked to annotate,
Buildkite's environment read by the settings (gate.core.settings), and the shipped pipeline's
comment command run as the agent runs it, against the fake GitHub server."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from support import factories as f
from support.cli import gate_command, gate_env, gate_subprocess
from support.fake_github import TOKEN
from support.paths import REPO_ROOT

from gate.core.errors import GateError
from gate.core.settings import Settings
from gate.github.buildkite import annotate, style_for
from gate.judge.verdict import Outcome, save_verdict

AGENT = """#!/usr/bin/env python3
import json, os, sys
record = {"argv": sys.argv[1:], "stdin": sys.stdin.read()}
with open(os.environ["AGENT_LOG"], "a") as fh:
    fh.write(json.dumps(record) + "\\n")
sys.exit(int(os.environ.get("AGENT_EXIT", "0")))
"""


@pytest.fixture
def agent(tmp_path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    path = folder / "buildkite-agent"
    path.write_text(AGENT)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return folder


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def buildkite_env(agent: Path, log: Path, **extra) -> dict[str, str]:
    return {"PATH": f"{agent}{os.pathsep}{os.environ['PATH']}", "AGENT_LOG": str(log),
            "BUILDKITE": "true", "BUILDKITE_REPO": "git@github.com:octo/vllm.git",
            "BUILDKITE_PULL_REQUEST": "45424", "BUILDKITE_COMMIT": "a" * 40,
            "BUILDKITE_BRANCH": "fix-bitmask", "BUILDKITE_PULL_REQUEST_BASE_BRANCH": "main",
            "BUILDKITE_BUILD_URL": "https://buildkite.com/vllm/ci/builds/7", **extra}


def test_annotate_posts_the_report_with_the_verdicts_style(tmp_path, agent):
    verdict = save_verdict(f.verdict(), tmp_path / "verdict.json")
    head = f.results_folder(tmp_path / "head", f.sweep_results("head", f.REGRESSED))
    base = f.results_folder(tmp_path / "base", f.sweep_results("base", f.HEALTHY))
    log = tmp_path / "agent.log"
    proc = gate_subprocess("buildkite", "annotate", "--verdict", verdict, "--head",
                           head / "results.json", "--base", base / "results.json",
                           env=buildkite_env(agent, log))
    assert proc.returncode == 0, proc.stderr
    (call,) = calls(log)
    assert call["argv"] == ["annotate", "--style", "error", "--context", "perf-gate"]
    assert call["stdin"].startswith("### ❌ FAIL: guided drain 48% slower")
    assert "| Drain req/min (guided) |" in call["stdin"]
    assert "[build](https://buildkite.com/vllm/ci/builds/7)" in call["stdin"]


def test_a_failing_or_missing_agent_is_a_clear_error(tmp_path, agent):
    verdict = save_verdict(f.verdict(outcome=Outcome.PASS), tmp_path / "verdict.json")
    log = tmp_path / "agent.log"
    proc = gate_subprocess("buildkite", "annotate", "--verdict", verdict,
                           env=buildkite_env(agent, log, AGENT_EXIT="3"))
    assert proc.returncode == 2 and "buildkite-agent annotate failed (exit 3)" in proc.stderr
    assert calls(log)[0]["argv"][2] == "success"
    with pytest.raises(GateError, match="is not on PATH"):
        annotate("x", style="info", context="c", agent=str(tmp_path / "none"))
    with pytest.raises(GateError, match="style"):
        annotate("x", style="purple", context="c")


def test_styles_follow_the_outcome():
    assert style_for(Outcome.PASS) == "success" and style_for(Outcome.ERROR) == "error"
    assert style_for(Outcome.FAIL) == "error" and style_for(Outcome.INCONCLUSIVE) == "warning"
    assert {style_for(o) for o in Outcome} <= {"success", "warning", "error"}


def test_the_settings_read_buildkites_environment(tmp_path, agent):
    s = Settings.from_env(buildkite_env(agent, tmp_path / "log"))
    assert s.ci == "buildkite" and s.repository == "octo/vllm" and s.pr_number == 45424
    assert s.sha == "a" * 40 and s.ref_name == "fix-bitmask" and s.base_branch == "main"
    assert s.run_url == "https://buildkite.com/vllm/ci/builds/7"
    branch = Settings.from_env({"BUILDKITE": "true", "BUILDKITE_PULL_REQUEST": "false",
                                "BUILDKITE_REPO": "https://github.com/octo/vllm"})
    assert branch.pr_number is None and branch.repository == "octo/vllm"
    # GitHub's variables win where both speak; Buildkite's are read only on Buildkite
    both = Settings.from_env({"BUILDKITE": "true", "BUILDKITE_COMMIT": "b" * 40,
                              "GITHUB_SHA": "c" * 40, "GITHUB_REPOSITORY": "o/r"})
    assert both.sha == "c" * 40 and both.repository == "o/r"
    assert Settings.from_env({"BUILDKITE_COMMIT": "b" * 40}).sha is None
    with pytest.raises(GateError, match="BUILDKITE_PULL_REQUEST"):
        Settings.from_env({"BUILDKITE": "true", "BUILDKITE_PULL_REQUEST": "abc"})


# -- the comment step of buildkite/perf-gate.yml ------------------------------------------
def uploaded(command: str, at_upload: dict[str, str]) -> str:
    """A pipeline command as `buildkite-agent pipeline upload` leaves it: `$$` is a literal
    `$` for the step's shell, `${NAME}`/`$NAME` the uploading step's value."""
    out, i = [], 0
    for m in re.finditer(r"\$\$|\$\{(\w+)\}|\$(\w+)", command):
        out.append(command[i:m.start()])
        out.append("$" if m.group(0) == "$$" else at_upload[m.group(1) or m.group(2)])
        i = m.end()
    return "".join(out) + command[i:]


def comment_step_publish() -> str:
    doc = yaml.safe_load((REPO_ROOT / "buildkite" / "perf-gate.yml").read_text())
    (step,) = [s for s in doc["steps"] if s["key"] == "perf-gate-comment"]
    (command,) = [c for c in step["commands"] if "publish --post-comment-file" in c]
    command = uploaded(command, {"GATE_REF": "0" * 40})
    return command.replace("/tmp/gate-venv/bin/gate", shlex.join(gate_command()))


def run_comment_step(fake, tmp_path, head: str) -> subprocess.CompletedProcess:
    env = gate_env({**buildkite_env(tmp_path, tmp_path / "log"), "GITHUB_TOKEN": TOKEN,
                    "GITHUB_API_URL": fake.url, "BUILDKITE_REPO": "git@github.com:octo/vllm.git",
                    "BUILDKITE_PULL_REQUEST": "12", "BUILDKITE_COMMIT": head})
    return subprocess.run(["bash", "-c", comment_step_publish()], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_comment_step_posts_on_the_builds_pr_at_the_builds_commit(fake, tmp_path):
    """N1: the measuring step ran the PR's code and wrote gate-comment.json; the step with
    the token takes the PR and the commit from Buildkite (BUILDKITE_PULL_REQUEST,
    BUILDKITE_COMMIT at run time), never the file's."""
    head = "a" * 40
    fake.pulls[12] = {"number": 12, "head": {"sha": head}}
    fake.pulls[99] = {"number": 99, "head": {"sha": head}}
    f.comment_file(tmp_path, pr=99)  # another PR's comment, as PR code can write it
    proc = run_comment_step(fake, tmp_path, head)
    assert proc.returncode == 2 and "is for PR #99, not #12" in proc.stderr, proc.stderr
    assert not fake.comments
    f.comment_file(tmp_path, pr=12)
    proc = run_comment_step(fake, tmp_path, "b" * 40)  # the PR moved on since the build
    assert proc.returncode == 2 and "not the measured commit" in proc.stderr, proc.stderr
    assert not fake.comments
    proc = run_comment_step(fake, tmp_path, head)
    assert proc.returncode == 0, proc.stderr
    assert list(fake.comments) == [12] and len(fake.comments[12]) == 1
