"""Settings read once from the environment into one typed object.

GitHub Actions describes the run through GITHUB_* variables, Buildkite through BUILDKITE_*
(BUILDKITE=true; the repository from BUILDKITE_REPO, the PR from BUILDKITE_PULL_REQUEST,
"false" on a branch build, the commit, branch, PR base branch and build URL); a GITHUB_*
variable wins where both say something. The gate's own options come as GATE_*. Everything downstream (publish, the GitHub client) takes a `Settings` and never reads
os.environ itself, so tests build one from a dict.

The token is a `SecretStr`: its repr and str are masked, and no code path writes it out.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from gate.core.errors import GateError

DEFAULT_API_URL = "https://api.github.com"
# Where a CPU release's `+cpu` torch comes from when pip's own sources lack it
# (gate.runner.release_venv).
DEFAULT_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
DEFAULT_SERVER_URL = "https://github.com"
# Matched with fullmatch: `$` would also accept a trailing newline (docs/action.md).
MARKER_ID_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    github_token: SecretStr | None = Field(None, description="GITHUB_TOKEN (or INPUT_GITHUB-TOKEN)")
    repository: str | None = Field(None, description="GITHUB_REPOSITORY, owner/name")
    api_url: str = DEFAULT_API_URL
    server_url: str = DEFAULT_SERVER_URL
    pr_number: int | None = Field(None, description="from the event payload or GATE_PR_NUMBER")
    step_summary: Path | None = None
    output: Path | None = None
    github_env: Path | None = Field(None, description="GITHUB_ENV: variables for later steps")
    runner_name: str | None = Field(None, description="RUNNER_NAME: this runner's registration")
    runner_temp: Path | None = Field(None, description="RUNNER_TEMP: emptied at each job's start")
    sha: str | None = None
    run_id: str | None = None
    marker_id: str = "default"
    comment: bool = True
    comment_file: Path = Path("gate-comment.json")
    path_prefix: str = Field(
        "", description="prefix of hunk paths in annotations (GATE_PATH_PREFIX)"
    )
    ref_name: str | None = Field(None, description="GITHUB_REF_NAME: the branch measured")
    cache_dir: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "gate",
        description="GATE_CACHE_DIR: where the tiny model is built (default ~/.cache/gate)",
    )
    torch_index: str = Field(
        DEFAULT_TORCH_INDEX, description="GATE_TORCH_INDEX: the extra index a CPU release's "
        "+cpu torch is installed from when pip's own sources lack it",
    )
    # What the shipped GPU workflows switch off (docs/security.md, "Running on a public
    # repository"): a plan file from the workspace, and calibrations from the cache folder.
    builtin_plans_only: bool = Field(
        False, description="GATE_BUILTIN_PLANS_ONLY: --plan takes a built-in plan's name only")
    cache_calibrations: bool = Field(
        True, description="GATE_CACHE_CALIBRATIONS: also read the cache folder's noise/")
    event_name: str | None = Field(None, description="GITHUB_EVENT_NAME")
    ref: str | None = Field(None, description="GITHUB_REF: the ref the run is for")
    workflow_ref: str | None = Field(
        None, description="GITHUB_WORKFLOW_REF: owner/repo/path@ref of the run's top workflow")
    ci: Literal["github", "buildkite", "none"] = Field(
        "none", description="which CI runs the gate: GITHUB_ACTIONS or BUILDKITE set to true")
    build_url: str | None = Field(None, description="BUILDKITE_BUILD_URL: the build's page")
    base_branch: str | None = Field(
        None, description="BUILDKITE_PULL_REQUEST_BASE_BRANCH: the branch a PR merges into")

    def calibration_cache(self) -> Path | None:
        """The cache folder whose noise/ calibrations are read beside --noise-dir; None when
        GATE_CACHE_CALIBRATIONS=false (the shipped GPU workflows: only trusted jobs write it)."""
        return self.cache_dir if self.cache_calibrations else None

    @property
    def run_url(self) -> str | None:
        if self.build_url:
            return self.build_url
        if not (self.repository and self.run_id):
            return None
        return f"{self.server_url.rstrip('/')}/{self.repository}/actions/runs/{self.run_id}"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        event_name = env.get("GITHUB_EVENT_NAME") or None
        event_path = Path(env["GITHUB_EVENT_PATH"]) if env.get("GITHUB_EVENT_PATH") else None
        pr = _int_or_none(env.get("GATE_PR_NUMBER"), "GATE_PR_NUMBER")
        if pr is None and event_path is not None:
            pr = pr_number_from_event(event_name, event_path)
        buildkite = parse_bool(env.get("BUILDKITE", "false"), "BUILDKITE")
        if pr is None and buildkite:
            pr = buildkite_pr(env.get("BUILDKITE_PULL_REQUEST"))
        token = env.get("GITHUB_TOKEN") or env.get("INPUT_GITHUB-TOKEN") or None
        marker_id = env.get("GATE_MARKER_ID") or "default"
        check_marker_id(marker_id)
        bk = (lambda name: env.get(name) or None) if buildkite else (lambda name: None)
        return cls(
            github_token=SecretStr(token) if token else None,
            repository=env.get("GITHUB_REPOSITORY") or repository_of(bk("BUILDKITE_REPO")),
            api_url=env.get("GITHUB_API_URL") or DEFAULT_API_URL,
            server_url=env.get("GITHUB_SERVER_URL") or DEFAULT_SERVER_URL,
            pr_number=pr,
            step_summary=_path_or_none(env.get("GITHUB_STEP_SUMMARY")),
            output=_path_or_none(env.get("GITHUB_OUTPUT")),
            github_env=_path_or_none(env.get("GITHUB_ENV")),
            runner_name=env.get("RUNNER_NAME") or None,
            runner_temp=_path_or_none(env.get("RUNNER_TEMP")),
            sha=env.get("GITHUB_SHA") or bk("BUILDKITE_COMMIT"),
            run_id=env.get("GITHUB_RUN_ID") or None,
            marker_id=marker_id,
            comment=parse_bool(env.get("GATE_COMMENT", "true"), "GATE_COMMENT"),
            comment_file=Path(env.get("GATE_COMMENT_FILE") or "gate-comment.json"),
            path_prefix=env.get("GATE_PATH_PREFIX", ""),
            ref_name=env.get("GITHUB_REF_NAME") or bk("BUILDKITE_BRANCH"),
            cache_dir=Path(env["GATE_CACHE_DIR"]) if env.get("GATE_CACHE_DIR") else
            Path.home() / ".cache" / "gate",
            torch_index=env.get("GATE_TORCH_INDEX") or DEFAULT_TORCH_INDEX,
            builtin_plans_only=parse_bool(env.get("GATE_BUILTIN_PLANS_ONLY", "false"),
                                          "GATE_BUILTIN_PLANS_ONLY"),
            cache_calibrations=parse_bool(env.get("GATE_CACHE_CALIBRATIONS", "true"),
                                          "GATE_CACHE_CALIBRATIONS"),
            event_name=event_name,
            ref=env.get("GITHUB_REF") or None,
            workflow_ref=env.get("GITHUB_WORKFLOW_REF") or None,
            ci="github" if env.get("GITHUB_ACTIONS") == "true" else
            "buildkite" if buildkite else "none",
            build_url=bk("BUILDKITE_BUILD_URL"),
            base_branch=bk("BUILDKITE_PULL_REQUEST_BASE_BRANCH"),
        )


# git@github.com:owner/name.git, https://github.com/owner/name(.git), ssh://git@host/owner/name
_REPO_URL = re.compile(r"(?:[:/])([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")


def repository_of(url: str | None) -> str | None:
    """owner/name of a git remote URL as Buildkite gives it (BUILDKITE_REPO), or None."""
    found = _REPO_URL.search(url or "")
    return f"{found.group(1)}/{found.group(2)}" if found else None


def buildkite_pr(value: str | None) -> int | None:
    """BUILDKITE_PULL_REQUEST: the PR number, or "false" on a build of a branch."""
    if value is None or value.strip().lower() in ("", "false"):
        return None
    return _int_or_none(value, "BUILDKITE_PULL_REQUEST")


def check_marker_id(marker_id: str) -> str:
    if not isinstance(marker_id, str) or not MARKER_ID_RE.fullmatch(marker_id):
        raise GateError(
            f"marker id {marker_id!r} must be 1-64 characters of letters, digits, '_', '.', '-'"
        )
    return marker_id


def parse_bool(value: str, name: str) -> bool:
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise GateError(f"{name}={value!r} is not a boolean (true/false)")


def pr_number_from_event(event_name: str | None, event_path: Path) -> int | None:
    """The PR number of a pull_request(-ish) payload, or the `pr` input of workflow_dispatch."""
    try:
        event = json.loads(event_path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(event, dict):
        return None
    if isinstance(event.get("pull_request"), dict):
        return _int_or_none(event["pull_request"].get("number"), "pull_request.number")
    if event_name == "workflow_dispatch":
        inputs = event.get("inputs") or {}
        value = inputs.get("pr") if isinstance(inputs, dict) else None
        return _int_or_none(value, "inputs.pr")
    issue = event.get("issue")
    if isinstance(issue, dict) and issue.get("pull_request"):
        return _int_or_none(issue.get("number"), "issue.number")
    return None


def _int_or_none(value: object, name: str) -> int | None:
    if value is None or value == "":
        return None
    text = str(value).strip()
    if not text.isdigit() or int(text) <= 0:
        raise GateError(f"{name}={value!r} is not a positive PR number")
    return int(text)


def _path_or_none(value: str | None) -> Path | None:
    return Path(value) if value else None
