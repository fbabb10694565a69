"""`gate publish`: sticky PR comment, job summary, outputs and annotations for a verdict;
with --combine, one comment for a matrix's runners; with --post-comment-file, the
comment-poster workflow's posting of a comment file."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from gate.cli.common import nights_on_main, replayed_looks
from gate.core.errors import GateError
from gate.core.settings import Settings, check_marker_id
from gate.evidence.hunks import load_hunks
from gate.flows import backends
from gate.github.client import DEFAULT_MAX_WAIT_S
from gate.github.comment_file import CommentRun, combine
from gate.github.publish import (
    PostTarget,
    PublishOptions,
    default_client,
    post_bisect_report,
    post_comment_file,
    publish,
)
from gate.judge.verdict import Verdict, load_verdict
from gate.measure.results import Results, load_results


def add_parser(sub) -> None:
    p = sub.add_parser(
        "publish",
        help="post the sticky PR comment, job summary, outputs and annotations",
        description=(
            "Publish a verdict on GitHub. Reads GITHUB_* from the environment. The comment is "
            "rendered from --verdict/--head/--base/--hunks (or the --combine files) like `gate "
            "report`. Exits with the verdict's exit code whether or not the comment could be "
            "posted; without permission to comment, the comment's data go to --comment-file "
            "for the comment-poster workflow."
        ),
    )
    p.add_argument("--verdict", type=Path, help="verdict.json from `gate compare`/`gate ab`")
    p.add_argument("--head", type=Path, help="the head build's results.json (if there is one)")
    p.add_argument("--base", type=Path, help="the base build's results.json (A/B)")
    p.add_argument("--hunks", type=Path, help="hunks.json: shown, and annotated on a fail")
    p.add_argument("--profile-diff", type=Path, metavar="DIR",
                   help="a gate profile diff folder: shown, and the hunks ranked by it")
    p.add_argument("--report", type=Path, help="report.md for the job summary (default: the "
                   "comment's report)")
    p.add_argument("--backends", type=Path, metavar="DIR",
                   help="instead of --verdict/--head/--base/--profile-diff: the OUT folder of "
                   "`gate ab --backends`; the comment shows a table per backend")
    p.add_argument("--combine", type=Path, action="append", metavar="COMMENT_FILE",
                   help="a runner's gate-comment.json; repeat to merge a matrix into one comment")
    p.add_argument("--label", action="append",
                   help="with --combine: each runner's heading (default: the file's folder)")
    p.add_argument("--comment", action=argparse.BooleanOptionalAction, default=None,
                   help="post/update the sticky PR comment (default: on, or GATE_COMMENT)")
    p.add_argument("--comment-file", type=Path, help="where the comment's data go when not posted")
    p.add_argument("--marker-id", help="sticky comment id, one per matrix aggregation (default)")
    p.add_argument("--pr", type=int, help="PR number (default: from the event payload)")
    p.add_argument("--path-prefix", help="prefix for hunk paths in annotations (vLLM checkout dir)")
    p.add_argument("--post-comment-file", type=Path, metavar="FILE",
                   help="render and post a comment file written by a measuring run (the "
                   "comment-poster workflow)")
    p.add_argument("--expect-head-sha",
                   help="with --post-comment-file: refuse unless the PR's head commit is this one")
    p.add_argument("--history", type=Path, metavar="FILE",
                   help="the default branch's history file (gate history): each check's nights "
                   "in the comment; with --post-comment-file, the acknowledgements of the "
                   "measured head, checked against the file's and applied")
    p.add_argument("--noise-dir", type=Path, action="append",
                   help="A/B: the calibrations its sequential test used (as gate compare's), "
                   "to show the test look by look; default ./baselines/noise and the cache's")
    p.add_argument("--bisect-result", type=Path, metavar="FILE",
                   help="render the report of a bisect.json (gate bisect) and post it as a new "
                   "comment on --issue (the bisect workflow's report job)")
    p.add_argument("--issue", type=int, help="with --bisect-result: the issue to post on")
    p.add_argument("--bot-login", help="the login the token comments as, when GET /user cannot "
                   "say (a GitHub App's installation token: APP-SLUG[bot]); default: GET /user, "
                   "else github-actions[bot]")
    p.add_argument("--max-wait", type=float, default=DEFAULT_MAX_WAIT_S, metavar="SECONDS",
                   help="longest total wait for GitHub's rate limits; a longer required wait "
                   f"fails with exit 4 (default {DEFAULT_MAX_WAIT_S:.0f})")
    p.set_defaults(handler=handle)


def settings_from_args(args: argparse.Namespace, settings: Settings) -> Settings:
    changes: dict = {}
    if args.comment is not None:
        changes["comment"] = args.comment
    if args.comment_file is not None:
        changes["comment_file"] = args.comment_file
    if args.marker_id is not None:
        changes["marker_id"] = check_marker_id(args.marker_id)
    if args.pr is not None:
        if args.pr <= 0:
            raise GateError(f"--pr {args.pr} is not a PR number")
        changes["pr_number"] = args.pr
    if args.path_prefix is not None:
        changes["path_prefix"] = args.path_prefix
    return settings.model_copy(update=changes)


def single_run(args: argparse.Namespace, settings: Settings) -> CommentRun:
    if args.base and not args.head:
        raise GateError("--base needs --head")
    profile_diff, evidence = None, None
    if args.profile_diff:
        # Imported here: the poster's hash-pinned set has no numpy (docs/action.md)
        from gate.flows.diff_artifacts import load_written

        profile_diff, evidence = load_written(args.profile_diff)
    verdict = load_verdict(args.verdict)
    head = load_results(args.head) if args.head else None
    base = load_results(args.base) if args.base else None
    return CommentRun(verdict=verdict, head=head, base=base,
                      hunks=load_hunks(args.hunks) if args.hunks else None,
                      profile_diff=profile_diff, evidence=evidence,
                      **pictures(args, settings, verdict, head, base))


def pictures(args: argparse.Namespace, settings: Settings, verdict: Verdict,
             head: Results | None, base: Results | None) -> dict:
    """The comment's nights on the default branch and the test look by look. Pictures only: one
    that cannot be drawn is left out with a warning, and the verdict is published anyway."""
    try:
        return {"history": nights_on_main(args.history, head) if args.history and head else None,
                "trajectories": replayed_looks(verdict, head, base, noise_dir=args.noise_dir,
                                               cache_dir=settings.calibration_cache())}
    except GateError as exc:
        print(f"gate publish: the comment goes without its history and looks: {exc}",
              file=sys.stderr)
        return {}


def read_report(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GateError(f"cannot read report {path}: {exc.strerror}") from None


def handle(args: argparse.Namespace, settings: Settings) -> int:
    if args.max_wait < 0:
        raise GateError("--max-wait must be 0 or more seconds")
    run_pr = settings.pr_number  # the event's or the CI's, before --pr
    settings = settings_from_args(args, settings)
    factory = partial(default_client, max_wait_s=args.max_wait)
    if (args.bisect_result is None) != (args.issue is None):
        raise GateError("--bisect-result and --issue go together")
    if args.bisect_result is not None:
        return post_bisect_report(settings, args.bisect_result, args.issue,
                                  client_factory=factory)
    if args.post_comment_file is not None:
        target = PostTarget(pr=args.pr, expect_head_sha=args.expect_head_sha,
                            history=args.history)
        return post_comment_file(settings.model_copy(update={"pr_number": run_pr}),
                                 args.post_comment_file, target=target,
                                 bot_login=args.bot_login, client_factory=factory)
    if sum(x is not None for x in (args.verdict, args.combine, args.backends)) != 1:
        raise GateError("gate publish needs --verdict (one run) or --combine (a matrix) or "
                        "--backends (a table per backend), or --post-comment-file")
    if args.backends is not None:
        runs = backends.backend_runs(args.backends,
                                     load_hunks(args.hunks) if args.hunks else None)
    else:
        runs = combine(args.combine, args.label) if args.combine else [single_run(args, settings)]
    outputs = {"verdict-path": str(args.verdict or ""), "report-path": str(args.report or "")}
    options = PublishOptions(read_report(args.report), args.bot_login, outputs)
    return publish(settings, runs, options, client_factory=factory)
