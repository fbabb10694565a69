"""`gate trust`: the run-time checks the workflows make before PR code reaches a GPU runner.

    gate trust check-environment NAME       exit 0 when NAME has required reviewers and
                                            prevents self-review
    gate trust check-review --pr N --sha SHA --reviewer LOGIN
                                            exit 0 when LOGIN's latest review approves SHA
    gate trust check-head --pr N --sha SHA  exit 0 when PR N's head is still SHA
    gate trust revoke-label --pr N --label L  withdraw the approval label after a push
    gate trust check-runner --model-cache DIR  exit 0 when this runner is fresh and isolated
    gate trust check-on-default-branch --sha S [--sha S2]  exit 0 when each is a commit of
                                            the default branch (gate bisect's refs)
    gate trust check-writer --login L [--login L2]  exit 0 when each may push to the
                                            repository (write, maintain or admin)
    gate trust check-caller --workflow FILE [--branch B]  exit 0 when this run is FILE
                                            itself, dispatched on the default branch (or B):
                                            no caller, no other branch's copy

Exit codes: 0 ok, 1 the setting or state is missing (refuse to run), 2 bad arguments,
4 GitHub could not tell (refuse to run: fail closed). Reads GITHUB_TOKEN, GITHUB_REPOSITORY
and GITHUB_API_URL from the environment (check-runner: RUNNER_NAME, RUNNER_TEMP, GITHUB_ENV
and the job's whole environment, which it checks; check-caller: GITHUB_EVENT_NAME,
GITHUB_REF, GITHUB_WORKFLOW_REF).
"""

from __future__ import annotations

import argparse
import os

from gate.core.errors import GateError
from gate.core.settings import Settings
from gate.github import runner_check
from gate.github.publish import append_summary, write_outputs
from gate.github.trust import (
    check_caller,
    check_commit_sha,
    check_environment,
    check_head,
    check_on_default_branch,
    check_review,
    check_writer,
    client_for,
    default_branch,
    revoke_label,
)


def add_parser(subparsers) -> None:
    """Add `gate trust` and its checks; `handle(args, settings)` runs the chosen one."""
    p = subparsers.add_parser(
        "trust",
        help="run-time checks before PR code runs on a self-hosted runner",
        description=__doc__.split("\n\n")[0],
    )
    sub = p.add_subparsers(dest="trust_command", metavar="CHECK", required=True)

    env = sub.add_parser(
        "check-environment",
        help="fail unless the approval environment has required reviewers (actions: read)",
    )
    env.add_argument("name", help="environment name, e.g. perf-gate-fork")
    env.set_defaults(trust_check=run_check_environment)

    review = sub.add_parser(
        "check-review",
        help="fail unless LOGIN's latest review of the PR approves SHA (pull-requests: read)",
    )
    review.add_argument("--pr", type=int, required=True, help="PR number")
    review.add_argument("--sha", required=True, help="the commit the approval label landed on")
    review.add_argument("--reviewer", required=True, help="who added the label (sender.login)")
    review.set_defaults(trust_check=run_check_review)

    head = sub.add_parser(
        "check-head", help="fail unless the PR's head commit is SHA (pull-requests: read)"
    )
    head.add_argument("--pr", type=int, required=True, help="PR number")
    head.add_argument("--sha", required=True, help="the full commit SHA to be measured")
    head.set_defaults(trust_check=run_check_head)

    revoke = sub.add_parser(
        "revoke-label", help="remove the approval label from a PR (pull-requests: write)"
    )
    revoke.add_argument("--pr", type=int, required=True, help="PR number")
    revoke.add_argument("--label", required=True, help="label name, e.g. run-perf-gate")
    revoke.set_defaults(trust_check=run_revoke_label)

    on_branch = sub.add_parser(
        "check-on-default-branch",
        help="fail unless every SHA is a commit of the default branch (contents: read)",
    )
    on_branch.add_argument("--sha", action="append", required=True,
                           help="a full commit SHA (repeatable)")
    on_branch.add_argument("--repo", metavar="OWNER/NAME",
                           help="another repository's default branch, e.g. the gate's for "
                           "GATE_REF (default: this run's repository)")
    on_branch.set_defaults(trust_check=run_check_on_default_branch)

    writer = sub.add_parser(
        "check-writer",
        help="fail unless every LOGIN may push to the repository (write, maintain or admin)",
    )
    writer.add_argument("--login", action="append", required=True,
                        help="a GitHub login, e.g. the PR's author and the event's sender "
                        "(repeatable)")
    writer.set_defaults(trust_check=run_check_writer)

    caller = sub.add_parser(
        "check-caller",
        help="fail unless this run is FILE itself, started by a dispatch on the default branch",
    )
    caller.add_argument("--workflow", action="append", required=True, metavar="FILE",
                        help="the workflow's file name under .github/workflows/ (repeatable: "
                        "an allow-list)")
    caller.add_argument("--event", action="append", metavar="NAME",
                        help="an event the run may start on (repeatable; default "
                        "workflow_dispatch)")
    caller.add_argument("--branch", help="the branch the run must be on (default: the "
                        "repository's default branch)")
    caller.set_defaults(trust_check=run_check_caller)

    runner = sub.add_parser(
        "check-runner",
        help="fail unless this runner is fresh and isolated; point the caches at this job",
        description=runner_check.DESCRIPTION,
    )
    runner_check.add_arguments(runner)
    runner.set_defaults(trust_check=run_check_runner)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace, settings: Settings) -> int:
    return args.trust_check(args, settings)


def _pr(value: int) -> int:
    if value <= 0:
        raise GateError(f"--pr {value} is not a PR number")
    return value


def run_check_environment(args: argparse.Namespace, settings: Settings) -> int:
    review = check_environment(client_for(settings), args.name)
    print(
        f"gate trust: environment {review.name!r} requires approval by one of "
        f"{review.reviewers} reviewer(s)"
    )
    return 0


def run_check_review(args: argparse.Namespace, settings: Settings) -> int:
    pr = _pr(args.pr)
    sha = check_commit_sha(args.sha, "--sha")
    review = check_review(client_for(settings), pr, sha, args.reviewer)
    print(f"gate trust: @{args.reviewer} approved {sha} in review {review.html_url}")
    append_summary(settings.step_summary, f"Perf gate: @{args.reviewer} approved commit "
                   f"`{sha}` of PR #{pr} in [review {review.id}]({review.html_url}); the "
                   "approval label applies to that commit only.")
    write_outputs(settings.output, {"review-url": review.html_url})
    return 0


def run_check_head(args: argparse.Namespace, settings: Settings) -> int:
    pr = _pr(args.pr)
    sha = check_commit_sha(args.sha, "--sha")
    check_head(client_for(settings), pr, sha)
    print(f"gate trust: PR #{pr}'s head is {sha}")
    return 0


def run_revoke_label(args: argparse.Namespace, settings: Settings) -> int:
    pr = _pr(args.pr)
    removed = revoke_label(client_for(settings), pr, args.label)
    state = "removed" if removed else "was not on the PR"
    print(f"gate trust: label {args.label!r} {state} (PR #{pr}): a new push needs a new approval")
    return 0


def run_check_runner(args: argparse.Namespace, settings: Settings) -> int:
    # The job's whole environment is what this check inspects (the variables an earlier job
    # or the runner's .env could have set), not settings.
    return runner_check.check_runner(args, os.environ)


def run_check_on_default_branch(args: argparse.Namespace, settings: Settings) -> int:
    shas = [check_commit_sha(sha, "--sha") for sha in args.sha]
    client = client_for(settings, args.repo)
    for sha in shas:
        branch = check_on_default_branch(client, sha)
        print(f"gate trust: {sha} is a commit of {client.repository}'s default branch {branch}")
    return 0


def run_check_writer(args: argparse.Namespace, settings: Settings) -> int:
    client = client_for(settings)
    for login in dict.fromkeys(args.login):
        permission = check_writer(client, login)
        print(f"gate trust: @{login} has {permission} permission on {client.repository}")
    return 0


def run_check_caller(args: argparse.Namespace, settings: Settings) -> int:
    client = client_for(settings)
    found = check_caller(event_name=settings.event_name, ref=settings.ref,
                         workflow_ref=settings.workflow_ref, repository=client.repository,
                         branch=args.branch or default_branch(client), workflows=args.workflow,
                         events=tuple(args.event or ["workflow_dispatch"]))
    print(f"gate trust: this run is {found}, started on {settings.event_name}")
    return 0
