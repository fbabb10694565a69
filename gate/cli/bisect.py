"""`gate bisect`: the first commit of a range whose build is slower than the good one, or the
smallest set of one change's hunks that is (docs/bisect.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gate.cli.ab import ab_settings
from gate.cli.common import assignments, diff_settings
from gate.core.errors import GateError
from gate.core.progress import Progress
from gate.core.settings import Settings
from gate.flows import ab
from gate.flows.bisect import BisectOptions, bisect
from gate.flows.bisect_ab import ABSettings
from gate.flows.bisect_hunks import HunksOptions, bisect_hunks
from gate.flows.bisect_result import REPORT_FILE
from gate.flows.hunk_search import REPORT_FILE as HUNKS_REPORT
from gate.flows.sides import resolve_python
from gate.plan.spec import apply_overrides, load_plan
from gate.profile.diff_file import DiffSettings
from gate.profile.sampling import (
    DEFAULT_RATE_HZ,
    PROFILE_POLICIES,
    SamplingOptions,
    require_py_spy,
)
from gate.report.bisect import terminal_bisect, terminal_hunks


def add_parser(sub) -> None:
    p = sub.add_parser(
        "bisect", help="find the first slower commit of a range, or the slow hunks of one change",
        description="Over commits: confirm that BAD is slower than GOOD (an A/B), then bisect "
        "BAD's first-parent history, each step an A/B of that commit's build against GOOD's, "
        "built the cheapest way (its Python files over an installed build when nothing else "
        "differs). Commits that cannot be built, imported or served, or stay inconclusive, "
        "are skipped, never blamed. With --hunks --head: delta debugging over the Python hunks "
        "of HEAD (against its parent, or BASE's merge base) applied onto the parent build; "
        "with --hunks and --good/--bad: the same for the first bad commit, against the good "
        "build. The "
        "state is kept in OUT: run the same command again to go on after a cancel. Exit: 1 "
        "found, 0 no regression, 3 undecided or inconclusive, 4 error, 2 bad input.",
    )
    p.add_argument("--repo", type=Path, default=Path("."), help="the vLLM git checkout")
    p.add_argument("--good", help="a commit whose build is fast")
    p.add_argument("--bad", help="a later commit of the same branch whose build is slow")
    p.add_argument("--hunks", action="store_true",
                   help="delta-debug hunks: of one change (--head, optionally --base), or, "
                   "with --good and --bad, of the first bad commit once it is found")
    p.add_argument("--head", help="--hunks: the commit (or a PR's head) to take apart")
    p.add_argument("--base", help="--hunks: a branch; the parent is its merge base with HEAD "
                   "(default: HEAD's first parent)")
    p.add_argument("--python", help="the installed build's interpreter or virtualenv, which "
                   "steps overlay (default: this one)")
    p.add_argument("--installed-commit", help="the commit that build was made from (default: "
                   "--good, or the parent with --hunks)")
    p.add_argument("--install", choices=["precompiled", "source", "none"],
                   default="precompiled", help="for a commit that changes more than Python "
                   "files: its precompiled wheel (default), a source build, or skip it")
    p.add_argument("--plan", help="plan YAML file or built-in name (default: cpu-smoke)")
    p.add_argument("--out", type=Path, default=Path("gate-bisect"), help="output and state "
                   "folder (default ./gate-bisect)")
    p.add_argument("--step-budget-minutes", type=float,
                   help="runner minutes per step; an inconclusive A/B is repeated within it")
    p.add_argument("--step-attempts", type=int, default=2,
                   help="A/Bs per step at most while inconclusive (default 2)")
    p.add_argument("--reuse-builds", action="store_true",
                   help="resuming: overlay the builds an earlier session installed, as the "
                   "state lists them (only for an OUT you wrote yourself: a listed build is "
                   "imported from; by default a resumed bisect installs again)")
    _add_ab_options(p)
    p.set_defaults(handler=handle)


def _add_ab_options(p) -> None:
    p.add_argument("--max-rounds", type=int, help="override ab.max_rounds")
    p.add_argument("--min-rounds", type=int, help="override ab.min_rounds")
    p.add_argument("--rounds", type=int, help="exactly this many rounds per A/B")
    p.add_argument("--budget-minutes", type=float, help="override ab.budget_minutes")
    p.add_argument("--servers", choices=["persistent", "per_round"], help="override ab.servers")
    p.add_argument("--threshold", action="append", metavar="NAME=VALUE",
                   help="override a threshold")
    p.add_argument("--noise-dir", type=Path, action="append",
                   help="where this runner's calibrations are (repeatable; default "
                   "./baselines/noise); the cache folder's noise/ is always read too. Without "
                   "a calibration each A/B screens for gross slowdowns only")
    p.add_argument("--profile", choices=PROFILE_POLICIES, default="auto",
                   help="profile a step's builds after its rounds: auto (when it failed or "
                   "is inconclusive; default), always, never. The first bad commit's hunks "
                   "are ranked by its step's profile diff")
    p.add_argument("--profile-rate", type=int, default=DEFAULT_RATE_HZ)
    p.add_argument("--profile-windows", type=int, default=SamplingOptions().windows)
    p.add_argument("--profile-window", type=float, default=SamplingOptions().window_s,
                   help="seconds per profile window")
    p.add_argument("--profile-min-share", type=float, default=DiffSettings().min_share)
    p.add_argument("--quiet", action="store_true")


def _settings(args, settings: Settings) -> ABSettings:
    if args.step_attempts < 1:
        raise GateError("--step-attempts must be at least 1")
    if args.step_budget_minutes is not None and args.step_budget_minutes <= 0:
        raise GateError("--step-budget-minutes must be positive")
    plan = apply_overrides(load_plan(args.plan, builtin_only=settings.builtin_plans_only),
                           ab=ab_settings(args))
    options = SamplingOptions(rate_hz=args.profile_rate, windows=args.profile_windows,
                              window_s=args.profile_window)
    options.check()
    require_py_spy(args.profile)
    profiling = ab.Profiling(args.profile, options, diff_settings(min_share=args.profile_min_share))
    return ABSettings(plan=plan, thresholds=plan.thresholds.with_overrides(
                          assignments(args.threshold, "--threshold")),
                      noise_dirs=args.noise_dir, profiling=profiling,
                      cache_dir=settings.cache_dir, progress=Progress(quiet=args.quiet),
                      step_budget_minutes=args.step_budget_minutes,
                      max_attempts=args.step_attempts,
                      cache_calibrations=settings.cache_calibrations)


def _check_mode(args: argparse.Namespace) -> None:
    """Over commits (--good, --bad; with --hunks, then the first bad commit's hunks), or one
    change's hunks (--hunks --head, optionally --base)."""
    if args.head or args.base:
        if not args.hunks:
            raise GateError("--head and --base go with --hunks; a bisect over commits takes "
                            "--good and --bad")
        given = [f"--{n}" for n in ("good", "bad") if getattr(args, n)]
        if given:
            raise GateError(f"--hunks --head takes one change, not {' '.join(given)}")
        if not args.head:
            raise GateError("--base needs --head, the commit or PR head to take apart")
        return
    if not (args.good and args.bad):
        raise GateError("gate bisect needs --good and --bad, or --hunks --head"
                        if not args.hunks else "--hunks needs --head, or --good and --bad")


def handle(args, settings: Settings) -> int:
    _check_mode(args)
    if not args.repo.is_dir():
        raise GateError(f"--repo {args.repo} is not a folder")
    python = resolve_python(args.python)
    ab_settings_ = _settings(args, settings)
    if args.head:
        result = bisect_hunks(HunksOptions(
            repo=args.repo, head=args.head, base=args.base, out=args.out, python=python,
            installed_commit=args.installed_commit, install_mode=args.install,
            reuse_builds=args.reuse_builds), ab_settings_)
        print(terminal_hunks(result))
        print(f"\nreport: {args.out / HUNKS_REPORT}")
        return result.exit_code
    result_ = bisect(BisectOptions(
        repo=args.repo, good=args.good, bad=args.bad, out=args.out, python=python,
        installed_commit=args.installed_commit, install_mode=args.install,
        then_hunks=args.hunks, reuse_builds=args.reuse_builds), ab_settings_)
    print(terminal_bisect(result_))
    print(f"\nreport: {args.out / REPORT_FILE}")
    return result_.exit_code
