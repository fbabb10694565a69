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

Exit codes: 0 ok, 1 the setting or state is missing (refuse to run), 2 bad arguments,
4 GitHub could not tell (refuse to run: fail closed). Reads GITHUB_TOKEN, GITHUB_REPOSITORY
and GITHUB_API_URL from the environment (check-runner: RUNNER_NAME, RUNNER_TEMP, GITHUB_ENV).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gate.core.errors import GateError
from gate.core.settings import Settings
from gate.github.publish import append_summary, write_outputs
from gate.github.trust import (
    TrustError,
    check_commit_sha,
    check_environment,
    check_head,
    check_on_default_branch,
    check_review,
    client_for,
    revoke_label,
)
from gate.runner import isolation


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
    on_branch.set_defaults(trust_check=run_check_on_default_branch)
    add_check_runner(sub)
    p.set_defaults(handler=handle)


def add_check_runner(sub) -> None:
    runner = sub.add_parser(
        "check-runner",
        help="fail unless this runner is fresh and isolated; point the caches at this job",
        description="Before the code under test is checked out: the provisioning's marker "
        "(this boot, this runner, root-owned), a read-only model cache, no compile cache left "
        "from before, no instance metadata. On success the compile caches go to a folder of "
        "this job and the Hub offline, through GITHUB_ENV (docs/action.md).",
    )
    runner.add_argument("--marker", type=Path, default=isolation.DEFAULT_MARKER,
                        help=f"the provisioning's marker (default {isolation.DEFAULT_MARKER})")
    runner.add_argument("--marker-owner", type=int, default=0, metavar="UID",
                        help="who writes the marker (default 0, root)")
    runner.add_argument("--model-cache", type=Path, required=True,
                        help="the Hugging Face hub cache the provisioning mounted read-only")
    runner.add_argument("--metadata", action="append", metavar="HOST:PORT",
                        help="an instance metadata endpoint that must not answer (repeatable; "
                        f"default {isolation.DEFAULT_METADATA[0]})")
    runner.add_argument("--job-cache", type=Path,
                        help="the job's cache folder (default RUNNER_TEMP/perf-gate-caches)")
    runner.set_defaults(trust_check=run_check_runner)


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
    if review.can_admins_bypass:
        print(
            f"gate trust: warning: administrators can bypass {review.name!r}'s reviewers; "
            "turn off 'Allow administrators to bypass configured protection rules'",
            file=sys.stderr,
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
    user = isolation.JobUser.current()
    job_cache = args.job_cache or (settings.runner_temp / "perf-gate-caches"
                                   if settings.runner_temp else None)
    if job_cache is None:
        raise GateError("--job-cache is needed outside a runner (RUNNER_TEMP is not set)")
    if settings.github_env is None:
        raise GateError("GITHUB_ENV is not set: nothing would point the caches at this job")
    problems = runner_problems(args, settings, user)
    for problem in problems:
        print(f"gate trust: refused: {problem}", file=sys.stderr)
    if problems:
        raise TrustError(f"this runner is not fit to run a PR's code ({len(problems)} "
                         "problem(s) above); see docs/action.md, 'Provisioning a GPU runner'")
    caches = isolation.prepare_job_caches(job_cache, args.model_cache)
    write_outputs(settings.github_env, caches.env)
    print(f"gate trust: runner {settings.runner_name} is fresh and isolated; compile caches in "
          f"{caches.root}, models read-only and offline from {caches.model_cache}")
    return 0


def runner_problems(args: argparse.Namespace, settings: Settings,
                    user: isolation.JobUser) -> list[str]:
    boot_id = isolation.BOOT_ID.read_text().strip() if isolation.BOOT_ID.exists() else ""
    marker = isolation.MarkerCheck(args.marker, boot_id, settings.runner_name, args.marker_owner)
    return (isolation.marker_problems(marker, user)
            + isolation.model_cache_problems(args.model_cache, user)
            + isolation.stale_cache_problems(isolation.default_cache_dirs(user))
            + isolation.metadata_problems(args.metadata or isolation.DEFAULT_METADATA))


def run_check_on_default_branch(args: argparse.Namespace, settings: Settings) -> int:
    shas = [check_commit_sha(sha, "--sha") for sha in args.sha]
    client = client_for(settings)
    for sha in shas:
        branch = check_on_default_branch(client, sha)
        print(f"gate trust: {sha} is a commit of the default branch {branch}")
    return 0
