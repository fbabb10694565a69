"""`gate hunks`: the PR's diff hunks in the watched hot paths, ranked, as hunks.json."""

from __future__ import annotations

import sys
from pathlib import Path

from gate.core.files import write_atomic
from gate.core.settings import Settings
from gate.evidence.hunks import DEFAULT_WATCH, HunkSet, extract_hunks


def add_parser(sub) -> None:
    p = sub.add_parser(
        "hunks",
        help="diff hunks of the watched structured-output paths (merge-base..head)",
        description="Write the hunks of `git diff $(git merge-base BASE HEAD) HEAD` in the "
        "watched paths, most suspicious first (pin_memory, torch.full staging, non_blocking "
        "copies, bitmask, thread settings, xgrammar pin).",
    )
    p.add_argument("--repo", default=".", help="the vLLM checkout (default: .)")
    p.add_argument("--base", required=True, help="the base ref, e.g. origin/main")
    p.add_argument("--head", required=True, help="the head ref, e.g. HEAD")
    p.add_argument(
        "--watch", action="append", metavar="GLOB",
        help="a watched path glob (repeatable; replaces the defaults). Defaults: "
        + ", ".join(DEFAULT_WATCH),
    )
    p.add_argument("--also-watch", action="append", metavar="GLOB", default=[],
                   help="a glob watched in addition to the defaults (or to --watch)")
    p.add_argument("--out", type=Path, help="write hunks.json here (default: stdout)")
    p.set_defaults(handler=handle)


def summary(hs: HunkSet) -> str:
    ranked = [h for h in hs.hunks if h.mechanisms]
    line = (f"{len(hs.hunks)} hunk(s) in {hs.files_watched} watched of {hs.files_changed} "
            f"changed file(s); {len(ranked)} touch known regression mechanisms")
    if ranked:
        top = ranked[0]
        line += f"; top: {top.path!r}:{top.new_start} [{', '.join(top.mechanisms)}]"
    return line


def handle(args, settings: Settings) -> int:
    watch = list(args.watch or DEFAULT_WATCH) + list(args.also_watch)
    hs = extract_hunks(args.repo, args.base, args.head, watch)
    text = hs.model_dump_json(indent=1)
    if args.out:
        write_atomic(args.out, text + "\n")
    else:
        sys.stdout.write(text + "\n")
    print(f"gate hunks: {summary(hs)}", file=sys.stderr)
    return 0
