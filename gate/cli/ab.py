"""`gate ab`: measure the base and head builds on this runner, round by round, until the
verdict is decided or the budget is spent."""

from __future__ import annotations

from pathlib import Path

from gate.cli.common import assignments, diff_settings, int_list
from gate.core.errors import GateError
from gate.core.progress import Progress
from gate.core.settings import Settings
from gate.evidence import wait
from gate.flows import ab, backends
from gate.judge.compare import compare_results
from gate.judge.noise import noise_for
from gate.judge.verdict import Verdict, save_verdict
from gate.plan.spec import apply_overrides, load_plan
from gate.profile.diff import DiffSettings
from gate.profile.sampling import DEFAULT_RATE_HZ, PROFILE_POLICIES, SamplingOptions
from gate.report import terminal


def add_parser(sub) -> None:
    p = sub.add_parser(
        "ab", help="A/B: measure base and head builds interleaved until the verdict is decided",
        description="Measure the base and head builds on this runner in rounds (both servers up "
        "and cells alternating, or a fresh server per build and round, as the plan's `ab` "
        "says), judge after every round, and stop as soon as every check is decided, a check "
        "fails, or the budget is spent. Exit codes as gate compare.",
    )
    p.add_argument("--base", help="base build: interpreter or virtualenv (default: this one)")
    p.add_argument("--head", help="head build: interpreter or virtualenv (default: this one)")
    p.add_argument("--base-env", action="append", metavar="KEY=VALUE",
                   help="environment of the base build's server (repeatable)")
    p.add_argument("--head-env", action="append", metavar="KEY=VALUE",
                   help="environment of the head build's server (repeatable)")
    p.add_argument("--plan", help="plan YAML file or built-in name (default: cpu-smoke)")
    p.add_argument("--max-rounds", type=int, help="override ab.max_rounds")
    p.add_argument("--min-rounds", type=int, help="override ab.min_rounds")
    p.add_argument("--rounds", type=int, help="exactly this many rounds (min = max)")
    p.add_argument("--budget-minutes", type=float, help="override ab.budget_minutes")
    p.add_argument("--servers", choices=["persistent", "per_round"], help="override ab.servers")
    p.add_argument("--out", type=Path, default=Path("gate-ab"), help="output folder")
    p.add_argument("--noise-dir", type=Path, default=Path("baselines") / "noise",
                   help="where the runner's noise profiles are (default ./baselines/noise)")
    p.add_argument("--threshold", action="append", metavar="NAME=VALUE", help="override a threshold")
    p.add_argument("--drain-requests", type=int)
    p.add_argument("--levels", type=int_list)
    p.add_argument("--window", type=float, help="override sweep.window_s (seconds per cell)")
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
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(handler=handle)


def ab_settings(args) -> dict:
    """The plan's `ab` settings the command line overrides."""
    changes = {"max_rounds": args.max_rounds, "min_rounds": args.min_rounds,
               "budget_minutes": args.budget_minutes, "servers": args.servers}
    if args.rounds is not None:
        if args.rounds < 1:
            raise GateError("--rounds must be at least 1")
        changes.update(max_rounds=args.rounds, min_rounds=args.rounds)
    return {k: v for k, v in changes.items() if v is not None}


def handle(args, settings: Settings) -> int:
    plan = apply_overrides(load_plan(args.plan), drain_requests=args.drain_requests,
                           levels=args.levels, window_s=args.window, ab=ab_settings(args))
    thresholds = plan.thresholds.with_overrides(assignments(args.threshold, "--threshold"))
    base = ab.Build("base", ab.resolve_python(args.base), assignments(args.base_env, "--base-env"))
    head = ab.Build("head", ab.resolve_python(args.head), assignments(args.head_env, "--head-env"))
    names = backends.selected(plan, backends.parse_selection(args.backends))

    def judge_for(out: Path) -> ab.Judge:
        def judge(head_results, base_results):
            noise = noise_for(args.noise_dir, head_results.plan.name, head_results.plan_hash,
                              head_results.fingerprint.hardware_key)
            return compare_results(head_results, base_results, None, thresholds, noise=noise,
                                   head_path=str(out / "head" / "results.json"),
                                   base_path=str(out / "base" / "results.json"))
        return judge

    options = SamplingOptions(rate_hz=args.profile_rate)
    options.check()
    context = backends.ABContext(Progress(quiet=args.quiet), settings.cache_dir,
                                 ab.Profiling(args.profile, options,
                                              diff_settings(min_share=args.profile_min_share)))
    if not names:
        result = ab.ab(plan, base, head, args.out, judge_for(args.out), context.progress,
                       context.cache_dir, context.profiling)
        return finish(result, args.out)
    done = backends.ab_backends(plan, names, (base, head), args.out, judge_for, context)
    for name, result in done:
        finish(result, args.out / name, name)
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
    print(f"\nverdict: {path} (base: {out / 'base'}, head: {out / 'head'})")
    return verdict.exit_code


def with_wait_findings(result: ab.ABResult) -> Verdict:
    """The verdict with a note per guided arm and level whose TTFT grew, naming where the
    added time is (gate.evidence.wait)."""
    found = wait.findings(wait.wait_rows(result.head, result.base))
    return result.verdict.model_copy(update={
        "notes": result.verdict.notes + [f"where the wait is: {f}" for f in found]})
