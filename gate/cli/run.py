"""`gate run`: measure one vLLM build with a plan; writes results.json."""

from __future__ import annotations

from pathlib import Path

from gate.cli.common import add_model_runner, int_list
from gate.core.errors import EXIT_ERROR, EXIT_PASS, GateError
from gate.core.progress import Progress
from gate.core.settings import Settings
from gate.flows import backends, run
from gate.judge.verdict import Outcome
from gate.plan.spec import apply_overrides, load_plan, pin_runner
from gate.report import terminal
from gate.runner.fingerprint import warnings_for


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="measure a vLLM server: guided-JSON drain + concurrency sweep")
    p.add_argument("--plan", help="plan YAML file or built-in name (default: cpu-smoke)")
    p.add_argument("--base-url", help="measure this running server instead of starting one")
    p.add_argument("--out", type=Path, default=Path("gate-out"), help="output folder")
    p.add_argument("--label", default="head", help="which build this is (head, base, ...)")
    p.add_argument("--python", help="interpreter whose vLLM to launch (default: this one)")
    p.add_argument("--repeats", type=int, help="override plan.repeats")
    p.add_argument("--drain-requests", type=int, help="override drain.requests")
    p.add_argument("--drain-concurrency", type=int, help="override drain.concurrency")
    p.add_argument("--levels", type=int_list, help="override sweep.levels, e.g. 1,8,32")
    p.add_argument("--window", type=float, help="override sweep.window_s (seconds per cell)")
    p.add_argument("--max-tokens", type=int, help="override workload.max_tokens")
    p.add_argument("--no-drain", action="store_true", help="skip the drain")
    p.add_argument("--no-sweep", action="store_true", help="skip the sweep")
    add_model_runner(p)
    p.add_argument("--backends", metavar="NAME[,NAME]",
                   help="structured-output backends to measure, each on its own server, in "
                   "OUT/<backend>/ (replaces the plan's `backends`; e.g. xgrammar,guidance)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(handler=handle)


def handle(args, settings: Settings) -> int:
    plan = pin_runner(apply_overrides(
        load_plan(args.plan, builtin_only=settings.builtin_plans_only), repeats=args.repeats, drain_requests=args.drain_requests,
        drain_concurrency=args.drain_concurrency, levels=args.levels,
        window_s=args.window, max_tokens=args.max_tokens,
        no_drain=args.no_drain, no_sweep=args.no_sweep,
    ), args.model_runner)
    progress = Progress(quiet=args.quiet)
    progress(f"plan {plan.name}: {plan.repeats} repeat(s), drain "
             f"{plan.drain.requests if plan.drain.enabled else 'off'}, sweep levels "
             f"{plan.sweep.levels if plan.sweep.enabled else 'off'}")
    opts = run.RunOptions(out=args.out, cache_dir=settings.cache_dir, base_url=args.base_url,
                          python=args.python, label=args.label)
    names = backends.selected(plan, backends.parse_selection(args.backends))
    if names and args.base_url:
        raise GateError("--base-url measures one running server: it cannot be measured with "
                        "several backends (leave out --backends and the plan's `backends`)")
    if not names:
        results = run.measure_build(plan, opts, progress)
        return report(results, run.write(results, args.out))
    entries, code = [], EXIT_PASS
    for name, results, path in backends.run_backends(plan, names, opts, progress):
        print(f"\n== backend {name} ==")
        code = max(code, report(results, path))
        ok = Outcome.PASS if results.status == "complete" else Outcome.ERROR
        entries.append(backends.BackendEntry(backend=name, dir=name, outcome=ok,
                                             headline=f"{results.status}: {path}"))
    print(f"backends: {backends.write_index(args.out, 'run', entries)}")
    return code


def report(results, path) -> int:
    print(terminal.render(results))
    for warning in warnings_for(results.fingerprint):
        print(f"warning: {warning}")
    print(f"\nresults: {path}")
    return EXIT_PASS if results.status == "complete" else EXIT_ERROR
