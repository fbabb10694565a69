"""What the code under test sees of the job (issue 16, item 6): every process the gate starts
that runs the PR's code (pip building it, its interpreter probed, `vllm serve`) gets the
job's environment without the runner's file commands and without tokens. A stand-in
interpreter (a shell script) records the environment it was given; the gate's real code
paths start it: `gate install-vllm` as a subprocess, `gate doctor --python`, and the server
launcher."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.paths import REPO_ROOT

from gate.core.child_env import WITHHELD, code_under_test_env
from gate.measure.server import VllmServer
from gate.plan.spec import ServerSpec

# Written whole, then renamed: the server test stops the server as soon as a dump is there,
# and a dump seen half-written (the redirect creates the file before env writes) read as an
# environment without KEEP_ME.
FAKE_PYTHON = """#!/usr/bin/env bash
env > "$ENV_DUMPS/.$$" && mv "$ENV_DUMPS/.$$" "$ENV_DUMPS/$$"
case "$1 $2" in
  "-m vllm.entrypoints.openai.api_server") exec sleep 60 ;;
  "-c "*) echo '{"torch_threads": 1}' ;;
esac
exit 0
"""


@pytest.fixture
def job_env(tmp_path: Path) -> dict[str, str]:
    """A runner's step environment: file commands, a token, and one ordinary variable."""
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    files = {name: str(tmp_path / name.lower()) for name in
             ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STATE", "GITHUB_STEP_SUMMARY")}
    return {**os.environ, **files, "GITHUB_TOKEN": "ghs_NotForThePR", "GH_TOKEN": "ghs_x",
            "ACTIONS_RUNTIME_TOKEN": "rt", "ENV_DUMPS": str(dumps), "KEEP_ME": "yes",
            "PYTHONPATH": str(REPO_ROOT)}


@pytest.fixture
def fake_python(tmp_path: Path) -> str:
    path = tmp_path / "bin" / "python"
    path.parent.mkdir()
    path.write_text(FAKE_PYTHON)
    path.chmod(0o755)
    return str(path)


def dumps_of(job_env: dict[str, str]) -> list[Path]:
    return sorted(p for p in Path(job_env["ENV_DUMPS"]).iterdir() if not p.name.startswith("."))


def seen(job_env: dict[str, str]) -> list[dict[str, str]]:
    dumps = dumps_of(job_env)
    assert dumps, "the stand-in interpreter never ran"
    return [dict(line.split("=", 1) for line in d.read_text().splitlines() if "=" in line)
            for d in dumps]


def assert_withheld(job_env: dict[str, str]) -> None:
    for env in seen(job_env):
        assert env["KEEP_ME"] == "yes"
        assert not WITHHELD & set(env), sorted(WITHHELD & set(env))


def test_the_helper_withholds_file_commands_and_tokens(job_env):
    kept = code_under_test_env(job_env)
    assert kept["KEEP_ME"] == "yes" and not WITHHELD & set(kept)
    assert {"GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STATE",
            "GITHUB_STEP_SUMMARY", "GITHUB_TOKEN"} <= WITHHELD


def test_install_vllm_builds_the_pr_without_the_jobs_file_commands(job_env, fake_python):
    proc = subprocess.run(
        [sys.executable, "-m", "gate.cli", "install-vllm", "--mode", "wheel", "--wheel",
         "vllm-0.0.0-py3-none-any.whl", "--python", fake_python],
        capture_output=True, text=True, env=job_env, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert_withheld(job_env)


def test_doctor_probes_the_pr_interpreter_without_them(job_env, fake_python):
    proc = subprocess.run(
        [sys.executable, "-m", "gate.cli", "doctor", "--python", fake_python, "--sample-s", "0",
         "--json"],
        capture_output=True, text=True, env=job_env, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert_withheld(job_env)


def test_the_server_runs_without_them(job_env, fake_python, tmp_path, monkeypatch):
    for key, value in job_env.items():
        monkeypatch.setenv(key, value)
    spec = ServerSpec(model="model-dir", python=fake_python, shutdown_timeout_s=5)
    server = VllmServer(spec, "model-dir", tmp_path / "server.log", log=lambda _: None)
    server.start()
    try:
        deadline = time.monotonic() + 30
        while not dumps_of(job_env) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        server.stop()
    assert_withheld(job_env)
