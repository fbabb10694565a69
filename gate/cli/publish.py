"""`gate publish`: sticky PR comment, job summary, outputs and annotations for a verdict;
or, with --post-comment-file, the comment-poster workflow's posting of a comment file."""

from __future__ import annotations

import argparse
from pathlib import Path

from gate.errors import GateError
from gate.publish import post_comment_file, publish
from gate.settings import Settings, check_marker_id


def add_parser(sub) -> None:
    p = sub.add_parser(
        "publish",
        help="post the report as a sticky PR comment, job summary, outputs and annotations",
        description=(
            "Publish a verdict on GitHub. Reads GITHUB_* from the environment. Exits with the "
            "verdict's exit code whether or not the comment could be posted; without permission "
            "to comment the body goes to --comment-file for the comment-poster workflow."
        ),
    )
    p.add_argument(
        "--report",
        type=Path,
        action="append",
        help="report.md from `gate report`; repeat (with --verdict) to merge a matrix's runners",
    )
    p.add_argument(
        "--verdict", type=Path, action="append", help="verdict.json from `gate compare`/`gate ab`"
    )
    p.add_argument(
        "--label",
        action="append",
        help="with several reports: each one's heading (default: folder)",
    )
    p.add_argument("--hunks", type=Path, help="hunks.json: annotate its top hunks on a fail")
    p.add_argument(
        "--comment",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="post/update the sticky PR comment (default: on, or GATE_COMMENT)",
    )
    p.add_argument("--comment-file", type=Path, help="where the comment goes when not posted")
    p.add_argument("--marker-id", help="sticky comment id, one per matrix aggregation (default)")
    p.add_argument("--pr", type=int, help="PR number (default: from the event payload)")
    p.add_argument("--path-prefix", help="prefix for hunk paths in annotations (vLLM checkout dir)")
    p.add_argument(
        "--post-comment-file",
        type=Path,
        metavar="FILE",
        help="post a comment file written by a measuring run (the comment-poster workflow)",
    )
    p.add_argument(
        "--expect-head-sha",
        help="with --post-comment-file: refuse unless the PR's head commit is this one",
    )
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


def handle(args: argparse.Namespace, settings: Settings) -> int:
    settings = settings_from_args(args, settings)
    if args.post_comment_file is not None:
        return post_comment_file(
            settings, args.post_comment_file, pr=args.pr, expect_head_sha=args.expect_head_sha
        )
    if args.report is None or args.verdict is None:
        raise GateError("gate publish needs --report and --verdict (or --post-comment-file)")
    return publish(settings, args.report, args.verdict, args.hunks, labels=args.label)
