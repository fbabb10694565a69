"""`gate calibrate`: A/A rounds on this runner -> a noise profile for gate ab and gate compare."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from gate.cli.common import assignments, int_list
from gate.core.progress import Progress
from gate.core.settings import Settings
from gate.flows import ab, calibrate
from gate.plan.spec import BACKENDS, apply_overrides, load_plan


def add_parser(sub) -> None:
    p = sub.add_parser(
        "calibrate", help="measure this runner's noise (A/A rounds) and store a noise profile",
        description="Run the plan's A/B rounds with the same build on both sides (no early "
        "stop) and store, per check, the spread of the paired head/base ratio across rounds as "
        "a noise profile for this plan and hardware. gate ab and gate compare use it for their "
        "intervals; without one they fall back to a labelled constant.",
    )
    p.add_argument("--python", help="the build: interpreter or virtualenv (default: this one)")
    p.add_argument("--env", action="append", metavar="KEY=VALUE",
                   help="environment of the build's servers (repeatable)")
    p.add_argument("--plan", help="plan YAML file or built-in name (default: cpu-smoke)")
    p.add_argument("--rounds", type=int, default=20,
                   help="A/A rounds (default 20; at least 3)")
    p.add_argument("--noise-dir", type=Path, default=Path("baselines") / "noise",
                   help="where the profile is stored (default ./baselines/noise)")
    p.add_argument("--out", type=Path, default=Path("gate-calibrate"),
                   help="output folder for the A/A results")
    p.add_argument("--levels", type=int_list)
    p.add_argument("--window", type=float, help="override sweep.window_s (seconds per cell)")
    p.add_argument("--backend", choices=BACKENDS,
                   help="calibrate the plan with this structured-output backend (its profile "
                   "is stored as PLAN+BACKEND unless it is the plan's own)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(handler=handle)


def handle(args, settings: Settings) -> int:
    plan = apply_overrides(load_plan(args.plan), levels=args.levels, window_s=args.window)
    plan = plan.for_backend(args.backend) if args.backend else plan
    build = ab.Build("build", ab.resolve_python(args.python), assignments(args.env, "--env"))
    command = shlex.join(["gate", *sys.argv[1:]])
    path, profile = calibrate.calibrate(plan, build, args.rounds, args.out, args.noise_dir,
                                        Progress(quiet=args.quiet), settings.cache_dir, command)
    print(f"wrote noise profile {path} ({len(profile.checks)} checks, {args.rounds} A/A rounds)")
    for name, check in profile.checks.items():
        print(f"  {name}: sd of the paired log ratio {check.sigma:.4f} "
              f"(~{check.sigma * 100:.1f}% per round)")
    return 0
