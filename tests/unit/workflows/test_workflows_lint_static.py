"""What the workflows and action.yml pin and permit, read from the files: third-party actions
pinned by SHA, no persisted credentials, read-only defaults; and the lint script's zizmor
persona (integration/test_workflows_lint.py runs the linters)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from support.paths import REPO_ROOT
from support.workflows import WORKFLOWS

from gate.plan.cost import estimate
from gate.plan.spec import load_plan


def test_the_four_gate_workflows_are_shipped():
    names = {Path(p).name for p in WORKFLOWS}
    assert {
        "gate-pr.yml",
        "gate-rerun.yml",
        "gate-bisect.yml",
        "gate-nightly-baseline.yml",
        "gate-matrix.yml",
        "gate-calibrate.yml",
    } <= names


def test_ci_lint_runs_zizmor_with_the_auditor_persona():
    text = (REPO_ROOT / "scripts/ci_lint.sh").read_text()
    calls = [line for line in text.splitlines() if line.strip().startswith("zizmor ")]
    assert calls and all("--persona auditor" in c and "--min-severity medium" in c for c in calls)


def test_third_party_actions_pinned_by_sha_and_no_credentials_persisted():
    for path in ["action.yml", *WORKFLOWS]:
        text = (REPO_ROOT / path).read_text()
        for ref in re.findall(r"uses:\s*([^\s#]+)", text):
            if ref.startswith("./"):
                continue
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), f"{path}: {ref}"
        doc = yaml.safe_load(text)
        for job in (doc.get("jobs") or {}).values():
            for step in job.get("steps", []):
                if str(step.get("uses", "")).startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False, path


def test_workflows_default_to_read_and_writers_never_check_out_pr_code():
    """Read-only defaults; a job that may write checks out only the gate, never the code
    under test (test_workflows_trust_static.py covers the self-hosted jobs)."""
    for path in WORKFLOWS:
        doc = yaml.safe_load((REPO_ROOT / path).read_text())
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


def _ab_steps(workflow: dict) -> list[dict]:
    """The steps that run the gate with a plan, a round limit and a budget."""
    return [step["with"] for job in workflow["jobs"].values() for step in job.get("steps", [])
            if {"plan", "max-rounds", "budget-minutes"} <= set(step.get("with", {}))]


@pytest.mark.parametrize("name", ["gate-pr.yml", "gate-matrix.yml"])
def test_the_pr_workflows_budget_holds_the_blocks_their_rounds_ask_for(name):
    """A budget smaller than the blocks that max-rounds asks for stops the A/B early, at the
    plan's own estimate of a block (gate/plan/cost.py): the rounds promised would never run."""
    workflow = yaml.safe_load((REPO_ROOT / "workflows" / name).read_text())
    steps = _ab_steps(workflow)
    assert steps, name
    for step in steps:
        plans = ([step["plan"]] if "${{" not in step["plan"] else
                 [p["plan"] for p in workflow["jobs"]["measure"]["strategy"]["matrix"]["include"]])
        for plan_name in plans:
            plan = load_plan(plan_name)
            blocks = int(step["max-rounds"]) // plan.ab.rounds_per_block
            block_min = estimate(plan).ab_s(plan.ab.rounds_per_block) / 60
            assert blocks * block_min <= float(step["budget-minutes"]), (
                f"{name}: {blocks} blocks of {plan_name} ({block_min:.1f} min each) do not fit "
                f"budget-minutes {step['budget-minutes']}")
