"""`gate scope`: which model runner(s) and backend(s) the PR's changes call for (scope.json),
also as GITHUB_OUTPUT lines (`runners`, `backends`: JSON lists for a job matrix)."""

from __future__ import annotations

import json
from pathlib import Path

from gate.core.files import write_atomic
from gate.core.settings import Settings
from gate.evidence.scope import extract_scope, summary
from gate.github.workflow_commands import write_outputs
from gate.plan.spec import load_plan


def add_parser(sub) -> None:
    p = sub.add_parser(
        "scope", help="the model runner(s) and backend(s) a PR's changes call for",
        description="Map the files `git diff $(git merge-base BASE HEAD) HEAD` changes to the "
        "model runners to measure (vllm/v1/worker/gpu/ -> v2; the V1 runner, its input batch "
        "and structured_output/utils.py -> v1; code both use -> both; nothing of these -> the "
        "plan's default) and the structured-output backends (a backend's own file -> that "
        "backend; shared code -> the plan's). Writes scope.json; in GitHub Actions also the "
        "outputs `runners` and `backends` as JSON lists.",
    )
    p.add_argument("--repo", default=".", help="the vLLM checkout (default: .)")
    p.add_argument("--base", required=True, help="the base ref, e.g. origin/main")
    p.add_argument("--head", required=True, help="the head ref, e.g. HEAD")
    p.add_argument("--plan", help="plan YAML file or built-in name: its runner and backend are "
                                  "the default (default: cpu-smoke)")
    p.add_argument("--out", type=Path, required=True, help="write scope.json here")
    p.set_defaults(handler=handle)


def handle(args, settings: Settings) -> int:
    scope = extract_scope(args.repo, args.base, args.head, load_plan(args.plan, builtin_only=settings.builtin_plans_only))
    write_atomic(args.out, scope.model_dump_json(indent=1) + "\n")
    write_outputs(settings.output, {"runners": json.dumps(scope.runners),
                                    "backends": json.dumps(scope.backends),
                                    "scope-path": str(args.out)})
    print(f"gate scope: {summary(scope)}")
    print(f"runners={json.dumps(scope.runners)}")
    print(f"backends={json.dumps(scope.backends)}")
    return 0
