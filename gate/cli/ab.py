"""`gate ab`: measure the base and head builds interleaved on this runner, then judge."""

from __future__ import annotations

from pathlib import Path

from gate import ab, summary
from gate.cli.common import assignments, int_list, write_verdict
from gate.errors import GateError
from gate.plan import apply_overrides, load_plan
from gate.progress import Progress
from gate.settings import Settings


def add_parser(sub) -> None:
    p = sub.add_parser("ab", help="A/B: measure base and head builds interleaved, then compare")
    p.add_argument("--base", help="base build: interpreter or virtualenv (default: this one)")
    p.add_argument("--head", help="head build: interpreter or virtualenv (default: this one)")
    p.add_argument("--base-env", action="append", metavar="KEY=VALUE",
                   help="environment of the base build's server (repeatable)")
    p.add_argument("--head-env", action="append", metavar="KEY=VALUE",
                   help="environment of the head build's server (repeatable)")
    p.add_argument("--plan", help="plan YAML file or built-in name (default: cpu-smoke)")
    p.add_argument("--rounds", type=int, default=2,
                   help="ABAB rounds; each build gets one fresh server and repeat per round (default 2)")
    p.add_argument("--confirm", action="store_true", help="on FAIL, measure again; fail only if it agrees")
    p.add_argument("--out", type=Path, default=Path("gate-ab"), help="output folder")
    p.add_argument("--threshold", action="append", metavar="NAME=VALUE", help="override a threshold")
    p.add_argument("--drain-requests", type=int)
    p.add_argument("--levels", type=int_list)
    p.add_argument("--requests-per-cell", type=int)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(handler=handle)


def handle(args, settings: Settings) -> int:
    if args.rounds < 1:
        raise GateError("--rounds must be at least 1")
    plan = apply_overrides(load_plan(args.plan), drain_requests=args.drain_requests,
                           levels=args.levels, requests_per_cell=args.requests_per_cell)
    thresholds = plan.thresholds.with_overrides(assignments(args.threshold, "--threshold"))
    base = ab.Build("base", ab.resolve_python(args.base), assignments(args.base_env, "--base-env"))
    head = ab.Build("head", ab.resolve_python(args.head), assignments(args.head_env, "--head-env"))
    progress = Progress(quiet=args.quiet)
    verdict = ab.ab(plan, base, head, args.rounds, args.out, thresholds, progress,
                    settings.cache_dir, args.confirm)
    path = args.out / "verdict.json"
    write_verdict(verdict, path)
    print(summary.render_verdict(verdict))
    print(f"\nverdict: {path} (base: {args.out / 'base'}, head: {args.out / 'head'})")
    return verdict.exit_code
