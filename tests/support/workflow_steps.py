"""Running one `run:` step of a shipped workflow the way the runner runs it
(`bash --noprofile --norc -eo pipefail`, GITHUB_OUTPUT, GITHUB_EVENT_PATH and the step's
`env:` resolved with support/expressions.py from an event payload), pull_request_target
payloads, and the gate's CLI as a subprocess against the fake GitHub server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from support.action_runner import parse_output_file
from support.expressions import Evaluator
from support.fake_github import TOKEN, FakeGitHub  # TOKEN: the job token the fake accepts
from support.paths import REPO_ROOT
from support.workflows import step

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")

REPO = "octo/vllm"
FORK = "mallory/vllm"
SHA_A = "a" * 40
SHA_B = "b" * 40
BASE_SHA = "c" * 40
LABEL = "run-perf-gate"


# -- running a step's script like the runner ----------------------------------------------
def resolve(context: dict, text: object) -> str:
    return Evaluator(context).interpolate(str(text))


def run_step(
    doc: dict,
    job: str,
    name: str,
    tmp_path: Path,
    *,
    event_name: str = "pull_request_target",
    event: dict | None = None,
    fake: FakeGitHub | None = None,
    needs_outputs: dict | None = None,
    steps_outputs: dict | None = None,
    inputs: dict | None = None,
    extra_env: dict | None = None,
    cwd: Path | None = None,
) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """Run one `run:` step of a shipped workflow; returns the process and its outputs."""
    spec = step(doc, job, name)
    assert spec.get("shell") == "bash" and EXPR.search(spec["run"]) is None
    event = event or {}
    event_path = tmp_path / "event.json"
    event_path.write_text(json.dumps(event))
    output = tmp_path / f"output-{job}-{len(list(tmp_path.glob('output-*')))}"
    output.write_text("")
    context = {
        "github": {"token": TOKEN, "event": event, "sha": SHA_A, "run_id": "77",
                   "run_attempt": "1"},
        "needs": {k: {"outputs": v} for k, v in (needs_outputs or {}).items()},
        "steps": {k: {"outputs": v} for k, v in (steps_outputs or {}).items()},
        "inputs": inputs or {},
        "env": doc.get("env", {}),
        "runner": {"temp": str(tmp_path)},
    }
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO_ROOT),
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "LANG": "C.UTF-8",
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_API_URL": fake.url if fake else "http://127.0.0.1:9",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "RUNNER_TEMP": str(tmp_path),
        **{k: str(v) for k, v in doc.get("env", {}).items()},
        **{k: resolve(context, v) for k, v in (spec.get("env") or {}).items()},
        **(extra_env or {}),
    }
    script = tmp_path / "step.sh"
    script.write_text(spec["run"])
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=cwd or tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc, parse_output_file(output.read_text())


AUTHOR = {"login": "alice", "type": "User"}
MAINTAINER = {"login": "maintainer", "type": "User"}
DEPENDABOT = {"login": "dependabot[bot]", "type": "Bot"}


def pr_event(
    action: str,
    *,
    fork: bool = True,
    head_sha: str = SHA_A,
    labels: tuple[str, ...] = (),
    label: str | None = None,
    number: int = 7,
    author: dict | None = None,
    sender: dict | None = None,
    head_ref: str = "patch-1",
) -> dict:
    """A pull_request_target payload, trimmed to the fields GitHub documents. The sender is
    who acted: the author for a push, a maintainer for a label."""
    head_repo = {"full_name": FORK if fork else REPO}
    author = author or AUTHOR
    sender = sender or (MAINTAINER if action == "labeled" else author)
    event = {
        "action": action,
        "number": number,
        "pull_request": {
            "number": number,
            "user": author,
            "head": {"sha": head_sha, "ref": head_ref, "repo": head_repo},
            "base": {"sha": BASE_SHA, "ref": "main", "repo": {"full_name": REPO}},
            "labels": [{"name": name} for name in labels],
        },
        "repository": {"full_name": REPO, "default_branch": "main"},
        "sender": sender,
    }
    if label is not None:
        event["label"] = {"name": label}
    return event


def gate_cli(*args: str, fake: FakeGitHub, token: str = TOKEN) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "GITHUB_API_URL": fake.url,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_TOKEN": token,
    }
    env.pop("GITHUB_EVENT_PATH", None)
    return subprocess.run(
        [sys.executable, "-m", "gate.cli", *args], env=env, capture_output=True, text=True
    )


# -- one step of a workflow with no trust context (the calibrate workflow's tests) -----------
def run_workflow_step(doc: dict, job: str, name: str, cwd: Path, *, context: dict | None = None,
                      extra_env: dict | None = None) -> subprocess.CompletedProcess:
    spec = step(doc, job, name)
    assert spec.get("shell") == "bash" and EXPR.search(spec["run"]) is None
    context = {"env": doc.get("env", {}), "inputs": {}, "matrix": {}, "github": {},
               **(context or {})}
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO_ROOT),
        "HOME": os.environ.get("HOME", str(cwd)),
        "LANG": "C.UTF-8",
        "GITHUB_OUTPUT": str(cwd / "github-output"),
        "GITHUB_SERVER_URL": "https://github.com",
        "RUNNER_TEMP": str(cwd),
        **{k: str(v) for k, v in doc.get("env", {}).items()},
        **{k: resolve(context, v) for k, v in (spec.get("env") or {}).items()},
        **(extra_env or {}),
    }
    script = cwd / "step.sh"
    script.write_text(spec["run"])
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
