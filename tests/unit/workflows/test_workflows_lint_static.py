"""What the workflows and action.yml pin and permit, read from the files: third-party actions
pinned by SHA, no persisted credentials, read-only defaults; the lint script's zizmor persona
(integration/test_workflows_lint.py runs the linters), and that each self-hosted job's zizmor
ignore reason says what runs before its runner check."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from support.paths import REPO_ROOT
from support.workflows import WORKFLOWS, is_checkout, self_hosted_jobs

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


# -- what a self-hosted job runs before its runner check ----------------------------------
NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four"}
IGNORE = re.compile(r"runs-on: # zizmor: ignore\[self-hosted-runner\] (.*)")


def before_the_runner_check(job: dict) -> list[dict]:
    """The steps before the runner check: the action's step (its first step is the check
    when `runner-marker` is set), or the trusted jobs' own check_runner.py step."""
    for i, s in enumerate(job["steps"]):
        if "check_runner.py" in str(s.get("run", "")) or (
                s.get("uses") == "./.gate" and (s.get("with") or {}).get("runner-marker")):
            return job["steps"][:i]
    raise AssertionError("no runner check in a self-hosted job")


def what_runs(steps: list[dict]) -> list[str]:
    """Each step as the ignore reason must name it."""
    said, checkouts = [], sum(1 for s in steps if is_checkout(s))
    for s in steps:
        if is_checkout(s):
            continue
        if s.get("name") == "Check that the gate is pinned to a commit":
            said.append("the pin check")
        elif s.get("name") == "Check the inputs":
            said.append("the input check")
        elif "git rev-parse HEAD" in str(s.get("run", "")):
            said.append("the rev-parse of the checkout")
        elif str(s.get("uses", "")).startswith("actions/download-artifact@"):
            said.append(f"the download of this run's {s['with']['name']} artifact")
        else:
            raise AssertionError(f"a step the reason does not cover: {s.get('name')}")
    if checkouts:
        said.append(f"{NUMBERS[checkouts]} actions/checkout steps")
    return said


@pytest.mark.parametrize("path", [p for p in WORKFLOWS if "self-hosted-runner" in p.read_text()],
                         ids=lambda p: p.name)
def test_each_self_hosted_ignore_reason_says_what_runs_before_the_runner_check(path):
    """Review round four: the reasons said the job "stops before installing or running
    anything", while checkouts and an artifact download run before the check. Each reason
    names every step before it (the number of checkouts included)."""
    doc = yaml.safe_load(path.read_text())
    reasons = IGNORE.findall(path.read_text())
    jobs = self_hosted_jobs(doc)
    assert len(reasons) == len(jobs)
    for reason, job in zip(reasons, jobs.values(), strict=True):
        assert "before installing or running anything" not in reason
        for phrase in what_runs(before_the_runner_check(job)):
            assert phrase in reason, (path.name, phrase)
        assert "install nothing and run none of the checked-out code" in reason
