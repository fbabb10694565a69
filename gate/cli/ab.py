"""`gate ab`: measure the base and head builds on this runner in blocks of rounds, until the
sequential test decides; `--resume DIR` continues the test an earlier run started."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from gate.cli.common import add_model_runner, assignments, diff_settings, int_list
from gate.core.errors import GateError
from gate.core.progress import Progress
from gate.core.settings import Settings
from gate.evidence import wait
from gate.flows import ab, backends, calibrate
from gate.judge.ab_design import CALIBRATION_BLOCKS, Uncalibrated
from gate.judge.noise import cache_noise_dir
from gate.judge.verdict import Verdict, save_verdict
from gate.plan.spec import Plan, apply_overrides, load_plan, pin_runner
from gate.profile.diff_file import DiffSettings
from gate.profile.sampling import DEFAULT_RATE_HZ, PROFILE_POLICIES, SamplingOptions
from gate.report import terminal

# Options that shape the sequential test: fixed at its start, refused with --resume.
FIXED_BY_THE_TEST = ("plan", "max_rounds", "min_rounds", "rounds", "servers", "threshold",
                     "drain_requests", "levels", "window", "noise_dir", "calibrate")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "ab", help="A/B: measure base and head builds in blocks of rounds until decided",
        description="Measure the base and head builds on this runner in blocks of rounds (a "
        "fresh server pair per block), judge after every round by the sequential test, and "
        "stop as soon as it decides. A calibration of this runner sizes the test and shortens "
        "it; without one the test learns the runner's noise from its own blocks. Exit codes "
        "as gate compare, plus 5.",
    )
    _build_options(p)
    _test_options(p)
    _measure_options(p)
    p.set_defaults(handler=handle)


def _build_options(p) -> None:
    p.add_argument("--base", help="base build: interpreter or virtualenv (default: this one)")
    p.add_argument("--head", help="head build: interpreter or virtualenv (default: this one)")
    p.add_argument("--base-env", action="append", metavar="KEY=VALUE",
                   help="environment of the base build's server (repeatable)")
    p.add_argument("--head-env", action="append", metavar="KEY=VALUE",
                   help="environment of the head build's server (repeatable)")
    p.add_argument("--out", type=Path, default=Path("gate-ab"), help="output folder")
    p.add_argument("--resume", type=Path, metavar="DIR",
                   help="continue the sequential test of the A/B in DIR (its ab-state.json): "
                   "more blocks, same design, thresholds and calibration")
    add_model_runner(p)
    p.add_argument("--quiet", action="store_true")


def _test_options(p) -> None:
    """What shapes the sequential test (fixed at its start: refused with --resume)."""
    p.add_argument("--plan", help="plan YAML file or built-in name (default: cpu-smoke)")
    p.add_argument("--max-rounds", type=int, help="override ab.max_rounds")
    p.add_argument("--min-rounds", type=int, help="override ab.min_rounds")
    p.add_argument("--rounds", type=int, help="min = max = N rounds: no stop before N, and the "
                   "calibrated design must fit in N")
    p.add_argument("--servers", choices=["persistent", "per_round"], help="override ab.servers")
    p.add_argument("--noise-dir", type=Path, action="append",
                   help="where this runner's calibrations are (repeatable; default "
                   "./baselines/noise); the cache folder's noise/ is always read too")
    p.add_argument("--no-screening", action="store_true",
                   help="when no calibration applies, stop before measuring (exit 5) instead "
                   "of running the test on the run's own noise")
    p.add_argument("--calibrate", action="store_true",
                   help="when no calibration applies (or too few blocks of one), calibrate first "
                   "(A/A blocks of the base build, kept in the cache folder's noise/ for the "
                   "next run), then run the A/B")
    p.add_argument("--calibration-blocks", type=int, default=CALIBRATION_BLOCKS,
                   help=f"blocks of that calibration (default {CALIBRATION_BLOCKS})")
    p.add_argument("--threshold", action="append", metavar="NAME=VALUE", help="override a threshold")
    p.add_argument("--drain-requests", type=int)
    p.add_argument("--levels", type=int_list)
    p.add_argument("--window", type=float, help="override sweep.window_s (seconds per cell)")


def _measure_options(p) -> None:
    p.add_argument("--budget-minutes", type=float,
                   help="override ab.budget_minutes (with --resume: this run's budget)")
    p.add_argument("--profile", choices=PROFILE_POLICIES, default="auto",
                   help="profile both builds with py-spy after the rounds: always, never, or "
                   "auto = when a check failed or is inconclusive (default); writes "
                   "OUT/{base,head}/profile and OUT/profile-diff")
    p.add_argument("--profile-rate", type=int, default=DEFAULT_RATE_HZ,
                   help=f"py-spy samples per second (default {DEFAULT_RATE_HZ})")
    p.add_argument("--profile-min-share", type=float, default=DiffSettings().min_share,
                   help="smallest per-function difference the profile diff names, as a share "
                   "of the base build's time per token (default %(default)s: the noise between "
                   "two servers measured on CPU; see docs/profile.md)")
    p.add_argument("--backends", metavar="NAME[,NAME]",
                   help="structured-output backends to measure, each with its own A/B and "
                   "verdict in OUT/<backend>/ (replaces the plan's `backends`; e.g. "
                   "xgrammar,guidance, as `gate scope` picks them); exit code: the worst")


def ab_settings(args) -> dict:
    """The plan's `ab` settings the command line overrides."""
    changes = {"max_rounds": args.max_rounds, "min_rounds": args.min_rounds,
               "budget_minutes": args.budget_minutes, "servers": args.servers}
    if args.rounds is not None:
        if args.rounds < 1:
            raise GateError("--rounds must be at least 1")
        changes.update(max_rounds=args.rounds, min_rounds=args.rounds)
    return {k: v for k, v in changes.items() if v is not None}


def _builds(args) -> tuple[ab.Build, ab.Build]:
    return (ab.Build("base", ab.resolve_python(args.base), assignments(args.base_env, "--base-env")),
            ab.Build("head", ab.resolve_python(args.head), assignments(args.head_env, "--head-env")))


def _profiling(args) -> ab.Profiling:
    options = SamplingOptions(rate_hz=args.profile_rate)
    options.check()
    return ab.Profiling(args.profile, options, diff_settings(min_share=args.profile_min_share))


def handle(args, settings: Settings) -> int:
    progress = Progress(quiet=args.quiet)
    if args.resume:
        return finish(_resume(args, settings, progress), args.resume)
    options = _options(args, settings, progress)
    names = backends.selected(options.plan, backends.parse_selection(args.backends))
    if not names:
        return finish(_new(args, settings, options), args.out)
    done = []
    for name in names:  # one whole A/B per backend, each with its own servers and test
        progress(f"backend {name}: A/B")
        each = backends.for_backend(options, name)
        done.append((name, _new(args, settings, each)))
        finish(done[-1][1], each.out, name)
    index = backends.write_index(args.out, "ab", [backends.entry(name, result.verdict)
                                                  for name, result in done])
    print(f"\nbackends: {index}")
    return backends.load_index(args.out).outcome.exit_code


def finish(result: ab.ABResult, out: Path, backend: str | None = None) -> int:
    """Write and print one A/B's verdict (with where the wait is); its exit code."""
    verdict = with_wait_findings(result)
    path = out / "verdict.json"
    save_verdict(verdict, path)
    if backend:
        print(f"\n== backend {backend} ==")
    print(terminal.render_verdict(verdict))
    print(f"\nverdict: {path} (base: {out / 'base'}, head: {out / 'head'}; the test's state: "
          f"{out / 'ab-state.json'})")
    return verdict.exit_code


def with_wait_findings(result: ab.ABResult) -> Verdict:
    """The verdict with a note per guided arm and level whose TTFT grew, naming where the
    added time is (gate.evidence.wait)."""
    found = wait.findings(wait.wait_rows(result.head, result.base))
    return result.verdict.model_copy(update={
        "notes": result.verdict.notes + [f"where the wait is: {f}" for f in found]})


def ab_plan(args) -> Plan:
    """The plan this A/B measures: the named plan with the command line's changes."""
    return pin_runner(apply_overrides(load_plan(args.plan), drain_requests=args.drain_requests,
                                      levels=args.levels, window_s=args.window,
                                      ab=ab_settings(args)), args.model_runner)


def _options(args, settings: Settings, progress: Progress) -> ab.ABOptions:
    plan = ab_plan(args)
    base, head = _builds(args)
    return ab.ABOptions(
        plan=plan, base=base, head=head, out=args.out, cache_dir=settings.cache_dir,
        thresholds=plan.thresholds.with_overrides(assignments(args.threshold, "--threshold")),
        noise_dirs=args.noise_dir, progress=progress, profiling=_profiling(args),
        screen=not (args.calibrate or args.no_screening))


def _new(args, settings: Settings, options: ab.ABOptions) -> ab.ABResult:
    plan, base, progress = options.plan, options.base, options.progress
    try:
        return ab.ab(options)
    except Uncalibrated as exc:
        if not args.calibrate:
            raise
        blocks = exc.more_blocks or args.calibration_blocks
        progress(f"{exc}\n--calibrate: calibrating this runner first ({blocks} blocks)")
    done = calibrate.calibrate(calibrate.CalibrateOptions(
        plan=plan, build=base, blocks=max(blocks, calibrate.MIN_BLOCKS),
        out=options.out / "calibration",
        store=cache_noise_dir(settings.cache_dir), cache_dir=settings.cache_dir,
        noise_dirs=args.noise_dir, progress=progress,
        command=shlex.join(["gate", *sys.argv[1:]])))
    progress(f"calibration stored in {done.path}")
    return ab.ab(options)


def _resume(args, settings: Settings, progress: Progress) -> ab.ABResult:
    given = [name for name in FIXED_BY_THE_TEST if getattr(args, name, None) not in (None, False)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise GateError(f"--resume continues a test whose design was fixed at its start: "
                        f"{flags} cannot change it (start a new A/B instead)")
    if not (args.resume / "ab-state.json").is_file():
        raise GateError(f"--resume {args.resume}: no ab-state.json there (a folder gate ab "
                        "wrote is needed)")
    base, head = _builds(args)
    return ab.resume(ab.ResumeOptions(
        out=args.resume, cache_dir=settings.cache_dir,
        base=base if args.base or args.base_env else None,
        head=head if args.head or args.head_env else None,
        budget_minutes=args.budget_minutes, progress=progress, profiling=_profiling(args)))
