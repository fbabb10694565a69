"""`gate compare`: results in, verdict.json out (against a baseline, the base build, or alone)."""

from __future__ import annotations

from pathlib import Path

from gate.cli.common import assignments
from gate.core.settings import Settings
from gate.judge import baseline as bl
from gate.judge.compare import (
    ABReference,
    BaselineReference,
    NoReference,
    Reference,
    compare_results,
)
from gate.judge.noise import noise_dirs, noise_for
from gate.judge.verdict import save_verdict
from gate.measure.results import load_results, results_path
from gate.report import terminal


def add_parser(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="judge results against a baseline or the base build's results; writes verdict.json",
        description="Judge HEAD_RESULTS against a stored baseline (--baseline FILE|auto), the "
        "base build's results (--against), or alone (guided/free ratio and validity only). "
        "Exit codes: 0 pass, 1 fail, 2 bad input, 3 inconclusive, 4 error.",
    )
    p.add_argument("head", metavar="HEAD_RESULTS", help="results.json, or a folder holding one")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--baseline", metavar="FILE|auto",
                       help="a baseline YAML, or auto: match by fingerprint and plan")
    which.add_argument("--against", metavar="BASE_RESULTS",
                       help="A/B: the base build's results.json (or folder)")
    p.add_argument("--baselines-dir", default="baselines", type=Path,
                   help="where --baseline auto looks (default ./baselines)")
    p.add_argument("--noise-dir", type=Path, action="append",
                   help="where this runner's noise calibrations are (gate calibrate; "
                   "repeatable); default ./baselines/noise and the cache folder's noise/")
    p.add_argument("--out", type=Path,
                   help="verdict file (default: verdict.json next to HEAD_RESULTS)")
    p.add_argument(
        "--threshold", action="append", default=[], metavar="NAME=VALUE",
        help="override a threshold of the plan, e.g. drain_throughput_pct=15 (repeatable)",
    )
    p.set_defaults(handler=handle)


def handle(args, settings: Settings) -> int:
    head_path = results_path(args.head)
    head = load_results(head_path)
    thresholds = head.plan.thresholds.with_overrides(assignments(args.threshold, "--threshold"))
    reference: Reference = NoReference()
    if args.against:
        base_path = results_path(args.against)
        reference = ABReference(load_results(base_path), str(base_path))
    elif args.baseline:
        if args.baseline == "auto":
            path, baseline = bl.find_baseline(args.baselines_dir, head)
        else:
            path = Path(args.baseline)
            baseline = bl.load_baseline(path)
        reference = BaselineReference(baseline, str(path))
    cache = settings.calibration_cache()
    noise = noise_for(noise_dirs(args.noise_dir, cache), head.plan.name, head.plan_hash,
                      head.fingerprint)
    verdict = compare_results(head, reference, thresholds, noise=noise,
                              head_path=str(head_path))
    out = args.out or head_path.parent / "verdict.json"
    save_verdict(verdict, out)
    print(terminal.render_verdict(verdict))
    print(f"\nwrote {out}")
    return verdict.exit_code
