"""The shipped workflows (workflows/*.yml), read with a real YAML parser: their triggers, jobs
and steps."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from support.paths import REPO_ROOT

WORKFLOWS = sorted((REPO_ROOT / "workflows").glob("*.yml"))
PR_WORKFLOWS = ["gate-pr.yml", "gate-matrix.yml"]
SHA_RE = re.compile(r"[0-9a-f]{40}")


def load(name: str | Path) -> dict:
    return yaml.safe_load((REPO_ROOT / "workflows" / name).read_text())


def triggers(doc: dict) -> dict:
    on = doc.get(True, doc.get("on"))  # PyYAML reads `on:` as True
    return {on: None} if isinstance(on, str) else dict(on)


def runner_labels(job: dict) -> list[str]:
    """The labels of `runs-on`: a label, a list, or a {group, labels} mapping."""
    runs_on = job.get("runs-on", [])
    if isinstance(runs_on, dict):
        runs_on = runs_on.get("labels", [])
    return [runs_on] if isinstance(runs_on, str) else list(runs_on)


def runner_group(job: dict) -> str | None:
    runs_on = job.get("runs-on")
    return runs_on.get("group") if isinstance(runs_on, dict) else None


def runs_on_self_hosted(job: dict) -> bool:
    return "self-hosted" in runner_labels(job)


def self_hosted_jobs(doc: dict) -> dict[str, dict]:
    return {name: job for name, job in doc["jobs"].items() if runs_on_self_hosted(job)}


def needs(job: dict) -> list[str]:
    value = job.get("needs", [])
    return [value] if isinstance(value, str) else list(value)


def step(doc: dict, job: str, name: str) -> dict:
    return next(s for s in doc["jobs"][job]["steps"] if s.get("name") == name)


def is_checkout(s: dict) -> bool:
    return str(s.get("uses", "")).startswith("actions/checkout@")


def runs(job: dict, command: str) -> list[dict]:
    return [s for s in job["steps"] if command in str(s.get("run", ""))]


def gate_checkouts(job: dict) -> list[int]:
    return [
        i
        for i, s in enumerate(job["steps"])
        if is_checkout(s) and s["with"].get("repository") == "${{ env.GATE_REPOSITORY }}"
    ]
