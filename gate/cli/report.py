"""`gate report`: render verdict.json + results (+ hunks.json) into one markdown document."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from gate.cli.common import nights_on_main, replayed_looks
from gate.core.errors import GateError
from gate.core.files import write_atomic
from gate.core.settings import Settings
from gate.evidence.hunks import load_hunks
from gate.flows import backends
from gate.flows.diff_artifacts import load_written
from gate.judge.verdict import load_verdict
from gate.measure.results import load_results
from gate.report.chart import chart_series, write_png
from gate.report.render import (
    DEFAULT_TITLE,
    GITHUB_COMMENT_LIMIT,
    ReportInput,
    render_report,
    render_runs,
)

MIN_CHARS = 4000


def add_parser(sub) -> None:
    p = sub.add_parser(
        "report",
        help="render the markdown report (PR comment / job summary)",
        description="Render verdict.json and results into one markdown document: verdict, "
        "checks, guided/free table, chart, warnings, run info, watched diff hunks. Fitted "
        "to --max-chars by leaving out whole hunks, then whole sections. Without --head (the "
        "measurement left no results) a short report of the verdict alone.",
    )
    p.add_argument("--verdict", type=Path, help="verdict.json from gate compare")
    p.add_argument("--backends", type=Path, metavar="DIR",
                   help="instead of --verdict/--head/--base/--profile-diff: the OUT folder of "
                   "`gate ab --backends` (its backends.json); one table per backend")
    p.add_argument("--head", type=Path,
                   help="the head build's results.json (omit when the measurement left none)")
    p.add_argument("--base", type=Path, help="the base build's results.json (A/B)")
    p.add_argument("--hunks", type=Path, help="hunks.json from gate hunks")
    p.add_argument("--profile-diff", type=Path, metavar="DIR",
                   help="a gate profile diff folder: where the head spends more time, and the "
                   "hunks ranked by it (evidence.json)")
    p.add_argument("--out", type=Path, help="write the markdown here (default: stdout)")
    p.add_argument("--chart", type=Path, help="write a PNG chart of throughput vs concurrency")
    p.add_argument("--max-chars", type=int, default=GITHUB_COMMENT_LIMIT,
                   help=f"cap on the document's length (default {GITHUB_COMMENT_LIMIT:,})")
    p.add_argument("--title", default=DEFAULT_TITLE, help="the title under the verdict line")
    p.add_argument("--history", type=Path, metavar="FILE",
                   help="the history file (gate history): each check's nights on the default "
                   "branch as a sparkline beside it")
    p.add_argument("--noise-dir", type=Path, action="append",
                   help="A/B: the calibrations its sequential test used (as gate compare's), "
                   "to show the test look by look; default ./baselines/noise and the cache's "
                   "(not with GATE_CACHE_CALIBRATIONS=false)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace, settings: Settings) -> int:
    if args.max_chars < MIN_CHARS:
        raise GateError(f"--max-chars must be at least {MIN_CHARS}")
    if (args.verdict is None) == (args.backends is None):
        raise GateError("gate report needs --verdict (one run) or --backends (per backend)")
    if args.backends is not None:
        return per_backend(args)
    if args.base and not args.head:
        raise GateError("--base needs --head")
    head = load_results(args.head) if args.head else None
    base = load_results(args.base) if args.base else None
    series = chart_series(head, base) if head is not None else {}
    note = write_png(args.chart, series) if args.chart and head is not None else None
    profile_diff, evidence = load_written(args.profile_diff) if args.profile_diff else (None, None)
    verdict = load_verdict(args.verdict)
    ri = ReportInput(
        verdict=verdict, head=head, base=base,
        profile_diff=profile_diff, evidence=evidence,
        hunks=load_hunks(args.hunks) if args.hunks else None,
        title=args.title, max_chars=args.max_chars, chart_series=series,
        chart_name=args.chart.name if args.chart and head is not None else None, chart_note=note,
        history=nights_on_main(args.history, head) if args.history and head is not None
        else None,
        trajectories=replayed_looks(verdict, head, base, noise_dir=args.noise_dir,
                                    cache_dir=settings.calibration_cache()),
    )
    return emit(args, render_report(ri), note)


def per_backend(args: argparse.Namespace) -> int:
    if args.head or args.base or args.profile_diff or args.chart:
        raise GateError("--backends reads each backend's results and profile diff itself: "
                        "leave out --head, --base, --profile-diff and --chart")
    hunks = load_hunks(args.hunks) if args.hunks else None
    runs = [r.run_input() for r in backends.backend_runs(args.backends, hunks)]
    runs = [replace(r, title=args.title) for r in runs]
    return emit(args, render_runs(runs, args.max_chars), None)


def emit(args: argparse.Namespace, text: str, note: str | None) -> int:
    if args.out:
        write_atomic(args.out, text)
        print(f"gate report: wrote {args.out} ({len(text):,} chars)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if note and args.chart:
        print(f"gate report: {note}", file=sys.stderr)
    return 0
