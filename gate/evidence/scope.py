"""What a PR's changes call for: which model runner(s) to measure, and which structured-output
backend(s), from the files `git diff merge-base..head` changes (scope.json).

vLLM's two model runners reach the grammar bitmask through different code
(docs/background.md#two-model-runners): a PR that changes only V1's path is measured on V1, one
that changes only V2's on V2, one that changes code both use on both. A PR that changes none of
these is measured on the plan's default runner. The rules are in `RUNNER_RULES`, first match
wins; docs/action.md#the-scope-of-a-pr-gate-scope lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gate.core.git import merge_base, resolve_ref
from gate.evidence.hunks import check_repo, list_changes
from gate.plan.hot_paths import watched
from gate.plan.spec import Plan

SCOPE_SCHEMA_VERSION = 1
BOTH = ("v1", "v2")
AUTO = "auto"  # the plan pins no runner: vLLM chooses at start-up


@dataclass(frozen=True)
class Rule:
    glob: str
    runners: tuple[str, ...]
    why: str


# First match wins: V1's own files before the structured-output folder they sit in.
RUNNER_RULES = (
    Rule("vllm/v1/worker/gpu/**", ("v2",), "the V2 model runner"),
    Rule("vllm/v1/worker/gpu_model_runner.py", ("v1",), "the V1 model runner"),
    Rule("vllm/v1/worker/gpu_input_batch.py", ("v1",), "the V1 model runner's input batch"),
    Rule("vllm/v1/structured_output/utils.py", ("v1",),
         "V1's grammar bitmask staging (apply_grammar_bitmask)"),
    Rule("vllm/v1/structured_output/**", BOTH, "structured-output code both runners use"),
    Rule("vllm/utils/torch_utils.py", BOTH, "PIN_MEMORY and host-to-device copies"),
    Rule("vllm/v1/sample/**", BOTH, "the sampler"),
    Rule("vllm/v1/spec_decode/**", BOTH, "speculative decoding"),
    Rule("vllm/v1/core/sched/**", BOTH, "the scheduler"),
    Rule("requirements/common.txt", BOTH, "the xgrammar and other backends' pins"),
)

# A backend's own file names its backend; any other path a runner rule matches is shared by
# every backend the plan measures.
BACKEND_FILES = {
    "vllm/v1/structured_output/backend_xgrammar.py": "xgrammar",
    "vllm/v1/structured_output/backend_guidance.py": "guidance",
    "vllm/v1/structured_output/backend_outlines.py": "outlines",
    "vllm/v1/structured_output/backend_lm_format_enforcer.py": "lm-format-enforcer",
}


class PathScope(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    runners: list[str]
    backends: list[str]
    why: str


class Scope(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCOPE_SCHEMA_VERSION
    repo: str
    base: str
    head: str
    merge_base: str
    plan: str
    runners: list[str] = Field(description="model runners to measure: v1, v2, or auto")
    backends: list[str] = Field(description="structured-output backends to measure")
    default_used: bool = Field(description="no changed path called for a runner: the plan's")
    files_changed: int = 0
    paths: list[PathScope] = Field(default_factory=list, description="the paths that decided")


def plan_runner(plan: Plan) -> str:
    return plan.server.pinned_runner() or AUTO


def plan_backends(plan: Plan) -> list[str]:
    """The backends the plan measures (one today: server.structured_outputs_backend or the
    config's backend; vLLM's own choice when neither is set)."""
    backend = (plan.server.structured_outputs_backend
               or (plan.server.structured_outputs_config or {}).get("backend"))
    return [backend or AUTO]


def scope_of_path(path: str, plan: Plan) -> PathScope | None:
    rule = next((r for r in RUNNER_RULES if watched(path, [r.glob])), None)
    if rule is None:
        return None
    backend = BACKEND_FILES.get(path)
    return PathScope(path=path, runners=list(rule.runners),
                     backends=[backend] if backend else plan_backends(plan), why=rule.why)


def scope_of_paths(paths: list[str], plan: Plan) -> tuple[list[str], list[str], list[PathScope]]:
    """(runners, backends, the deciding paths) for changed paths; the plan's when none decide."""
    decided = [s for p in paths if (s := scope_of_path(p, plan)) is not None]
    if not decided:
        return [plan_runner(plan)], plan_backends(plan), []
    runners = sorted({r for s in decided for r in s.runners})
    backends = sorted({b for s in decided for b in s.backends})
    return runners, backends, decided


def extract_scope(repo: str | Path, base: str, head: str, plan: Plan) -> Scope:
    """The scope of `git diff merge-base(base, head) head` (renames count on both paths)."""
    repo_path = Path(repo)
    check_repo(repo_path)
    base_sha, head_sha = resolve_ref(repo_path, base), resolve_ref(repo_path, head)
    mb = merge_base(repo_path, base_sha, head_sha)
    changes = list_changes(repo_path, mb, head_sha)
    paths = list(dict.fromkeys(p for fc in changes for p in (fc.display_old, fc.display) if p))
    runners, backends, decided = scope_of_paths(paths, plan)
    return Scope(repo=str(repo_path), base=base, head=head, merge_base=mb, plan=plan.name,
                 runners=runners, backends=backends, default_used=not decided,
                 files_changed=len(changes), paths=decided)


def summary(scope: Scope) -> str:
    """One line for the log: what to measure and why."""
    runners = " and ".join(r.upper() if r != AUTO else "vLLM's choice" for r in scope.runners)
    if scope.default_used:
        why = (f"no change of the {scope.files_changed} changed file(s) is runner-specific: "
               f"plan {scope.plan}'s default")
    else:
        shown = "; ".join(f"{s.path} ({s.why})" for s in scope.paths[:4])
        more = f"; {len(scope.paths) - 4} more" if len(scope.paths) > 4 else ""
        why = shown + more
    return f"measure {runners}, backends {', '.join(scope.backends)}: {why}"
