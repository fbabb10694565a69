"""`gate trust`: the run-time checks the workflows make before PR code reaches a GPU runner.

    gate trust check-environment NAME       exit 0 when NAME has required reviewers
    gate trust check-head --pr N --sha SHA  exit 0 when PR N's head is still SHA
    gate trust revoke-label --pr N --label L  withdraw the approval label after a push
    gate trust check-on-default-branch --sha S [--sha S2]  exit 0 when each is a commit of
                                            the default branch (gate bisect's refs)

Exit codes: 0 ok, 1 the setting or state is missing (refuse to run), 2 bad arguments,
4 GitHub could not tell (refuse to run: fail closed). Reads GITHUB_TOKEN, GITHUB_REPOSITORY
and GITHUB_API_URL from the environment.
"""

from __future__ import annotations

import argparse
import sys

from gate.core.errors import GateError
from gate.core.settings import Settings
from gate.github.trust import (
    check_commit_sha,
    check_environment,
    check_head,
    check_on_default_branch,
    client_for,
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
    on_branch.set_defaults(trust_check=run_check_on_default_branch)
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
    if not review.prevent_self_review:
        print(
            f"gate trust: warning: {review.name!r} lets the person who started the run approve "
            "it; enable 'Prevent self-review'",
            file=sys.stderr,
        )
    if review.can_admins_bypass:
        print(
            f"gate trust: warning: administrators can bypass {review.name!r}'s reviewers; "
            "turn off 'Allow administrators to bypass configured protection rules'",
            file=sys.stderr,
        )
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


def run_check_on_default_branch(args: argparse.Namespace, settings: Settings) -> int:
    shas = [check_commit_sha(sha, "--sha") for sha in args.sha]
    client = client_for(settings)
    for sha in shas:
        branch = check_on_default_branch(client, sha)
        print(f"gate trust: {sha} is a commit of the default branch {branch}")
    return 0
