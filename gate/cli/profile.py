"""`gate profile record` and `gate profile diff`: the command-line face of gate.profile.sampling,
gate.profile.diff, gate.profile.flamegraph and gate.evidence.attribution."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from gate.cli.common import diff_settings
from gate.core.errors import EXIT_PASS, GateError
from gate.core.progress import Progress
from gate.core.settings import Settings
from gate.evidence.hunks import load_hunks
from gate.flows.diff_artifacts import ProfilePair, write_diff
from gate.plan.spec import load_plan
from gate.profile.data import load_build_profile
from gate.profile.diff_file import PROFILE_DIFF_FILE, DiffSettings
from gate.profile.sampling import DEFAULT_RATE_HZ, SPEEDSCOPE_FILE, SamplingOptions
from gate.profile.traffic import ProfileTarget, profile_server


def add_parser(sub) -> None:
    p = sub.add_parser("profile", help="profile a server with py-spy; diff two builds' profiles")
    cmds = p.add_subparsers(dest="profile_command", metavar="SUBCOMMAND")
    p.set_defaults(handler=lambda args, settings: _usage(p))
    _register_record(cmds)
    _register_diff(cmds)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    raise GateError("name a subcommand: record or diff")


def _register_record(cmds) -> None:
    r = cmds.add_parser("record", help="sample a running vLLM server during a guided load")
    r.add_argument("--base-url", required=True, help="the running server, e.g. http://127.0.0.1:8000")
    r.add_argument("--pid", type=int, help="the server's root pid (default: what listens on the port)")
    r.add_argument("--plan", help="plan whose workload builds the requests (default: cpu-smoke)")
    r.add_argument("--out", type=Path, required=True, help="folder for profile.json and artifacts")
    r.add_argument("--label", default="head", help="which build this is (base, head, ...)")
    r.add_argument("--rate", type=int, default=DEFAULT_RATE_HZ, help="py-spy samples per second")
    r.add_argument("--windows", type=int, default=5, help="sampling windows (noise is judged "
                   "across them)")
    r.add_argument("--window-s", type=float, default=3.0, help="seconds per window")
    r.add_argument("--settle-s", type=float, default=2.0, help="load before the first window")
    r.add_argument("--concurrency", type=int, help="requests in flight (default: the plan's drain)")
    r.add_argument("--root", action="append", type=Path, default=[],
                   help="source root that file names are made relative to (repeatable; "
                        "site-packages always is; default: the current folder)")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    r.set_defaults(handler=record)


def _register_diff(cmds) -> None:
    d = cmds.add_parser("diff", help="diff two profiles per function, name what is beyond noise")
    d.add_argument("base", type=Path, help="the base build's profile folder (or profile.json)")
    d.add_argument("head", type=Path, help="the head build's profile folder (or profile.json)")
    d.add_argument("--out", type=Path, required=True, help="folder for profile-diff.json etc.")
    d.add_argument("--hunks", type=Path, help="hunks.json to rank by the measured evidence")
    d.add_argument("--repo", type=Path, help="git repository of the hunks (default: hunks.json's)")
    d.add_argument("--top", type=int, default=15, help="rows of the printed table")
    defaults = DiffSettings()
    d.add_argument("--basis", choices=("wall", "cpu"), default=defaults.basis,
                   help="weigh samples by wall time (default), or scale each process's by its "
                        "CPU time over its active time: for programs that do not spin-wait, on "
                        "a machine shared with other work")
    d.add_argument("--confidence", type=float, default=defaults.confidence)
    d.add_argument("--min-share", type=float, default=defaults.min_share,
                   help="smallest difference named, as a share of the base build's total")
    d.add_argument("--min-rel", type=float, default=defaults.min_rel,
                   help="smallest difference named, relative to the function's base figure")
    d.set_defaults(handler=diff)


def record(args, settings: Settings) -> int:
    if args.concurrency is not None and args.concurrency < 1:
        raise GateError(f"--concurrency must be at least 1, got {args.concurrency}")
    opts = SamplingOptions(rate_hz=args.rate, windows=args.windows, window_s=args.window_s,
                           settle_s=args.settle_s)
    opts.check()
    plan = load_plan(args.plan, builtin_only=settings.builtin_plans_only)
    progress = Progress(quiet=args.quiet)
    roots = args.root or [Path(os.getcwd())]
    target = ProfileTarget(args.base_url, label=args.label, pid=args.pid,
                           concurrency=args.concurrency)
    profile = profile_server(target, plan, args.out, opts, roots=roots, log=progress)
    samples = sum(w.samples for w in profile.windows)
    print(f"profile of {profile.label}: {samples} samples, {profile.output_tokens:.0f} output "
          f"tokens in {len(profile.windows)} windows of {profile.window_s:.0f}s")
    for note in profile.notes:
        print(f"note: {note}")
    print(f"profile: {args.out / 'profile.json'}\nspeedscope: {args.out / SPEEDSCOPE_FILE}")
    return EXIT_PASS


def diff(args, settings: Settings) -> int:
    method = diff_settings(basis=args.basis, confidence=args.confidence,
                           min_share=args.min_share, min_rel=args.min_rel)
    hunkset = load_hunks(args.hunks) if args.hunks else None
    base, head = load_build_profile(args.base), load_build_profile(args.head)
    pair = ProfilePair(base, head, _folder(args.base), _folder(args.head))
    written = write_diff(pair, args.out, method, hunkset=hunkset, repo=args.repo, top=args.top)
    print(written.table)
    if written.evidence is not None:
        for h in written.evidence.hunks[:5]:
            why = h.evidence or f"no measured added time (pattern score {h.score:g})"
            print(f"hunk {h.rank}: {h.path}:{h.new_start or h.old_start}: {why}")
        for f in written.evidence.untouched[:5]:
            print(f"no hunk touches: {f.sentence()}")
    for note in written.diff.notes:
        print(f"note: {note}")
    print(f"\nprofile diff: {args.out / PROFILE_DIFF_FILE}")
    return EXIT_PASS


def _folder(path: Path) -> Path:
    return path if path.is_dir() else path.parent
