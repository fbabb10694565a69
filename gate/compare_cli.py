"""`gate compare` and `gate baseline update`: files in, verdict (or baseline) out."""

from __future__ import annotations

import os
from pathlib import Path

from tabulate import tabulate

from gate import baseline as bl
from gate.compare import apply_threshold_overrides, compare_results, results_figures
from gate.errors import EXIT_PASS, GateError
from gate.results import load_results, write_atomic
from gate.verdict import Check, Verdict


def register(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="judge results against a baseline or the base build's results; writes verdict.json",
        description="Judge HEAD_RESULTS against a stored baseline (--baseline FILE|auto), the "
        "base build's results (--against), or alone (guided/free ratio and validity only). "
        "Exit codes: 0 pass, 1 fail, 2 bad input, 3 inconclusive, 4 error.",
    )
    p.add_argument("head", metavar="HEAD_RESULTS", help="results.json, or a folder holding one")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--baseline", metavar="FILE|auto", help="a baseline YAML, or auto: match by fingerprint and plan")
    which.add_argument("--against", metavar="BASE_RESULTS", help="A/B: the base build's results.json (or folder)")
    p.add_argument("--baselines-dir", default="baselines", type=Path, help="where --baseline auto looks (default ./baselines)")
    p.add_argument("--out", type=Path, help="verdict file (default: verdict.json next to HEAD_RESULTS)")
    p.add_argument(
        "--threshold", action="append", default=[], metavar="NAME=VALUE",
        help="override a threshold of the plan, e.g. drain_throughput_pct=15 (repeatable)",
    )
    p.set_defaults(func=_compare)

    b = sub.add_parser("baseline", help="manage stored baselines")
    bsub = b.add_subparsers(dest="baseline_command", metavar="ACTION")
    u = bsub.add_parser(
        "update",
        help="record RESULTS as the baseline for their plan, hardware and model",
        description="Write or refresh the baseline for these results (the old figures go to the "
        "file's history). Refuses results that are incomplete, broken or not from the default branch.",
    )
    u.add_argument("results", metavar="RESULTS", help="results.json, or a folder holding one")
    u.add_argument("--baselines-dir", default="baselines", type=Path)
    u.add_argument("--branch", help="branch the results come from (default: $GITHUB_REF_NAME)")
    u.add_argument("--default-branch", default="main", help="the only branch baselines come from (default main)")
    u.add_argument("--commit", help="commit measured (default: $GITHUB_SHA, else the vLLM commit)")
    u.add_argument("--force-branch", action="store_true", help="record even from another branch")
    u.set_defaults(func=_update)
    b.set_defaults(func=lambda args: (b.print_help(), 2)[1])


def _results_path(ref: str) -> Path:
    path = Path(ref)
    return path / "results.json" if path.is_dir() else path


def _compare(args) -> int:
    head_path = _results_path(args.head)
    head = load_results(head_path)
    thresholds = apply_threshold_overrides(head.plan.thresholds, args.threshold)
    base = baseline = None
    base_path = baseline_path = None
    if args.against:
        base_path = _results_path(args.against)
        base = load_results(base_path)
    elif args.baseline:
        if args.baseline == "auto":
            path, baseline = bl.find_baseline(args.baselines_dir, head)
        else:
            path = Path(args.baseline)
            baseline = bl.load_baseline(path)
        baseline_path = str(path)
    verdict = compare_results(
        head, base, baseline, thresholds,
        head_path=str(head_path), base_path=str(base_path) if base_path else None,
        baseline_path=baseline_path,
    )
    out = args.out or head_path.parent / "verdict.json"
    write_atomic(out, verdict.model_dump_json(indent=1))
    print(render(verdict))
    print(f"\nwrote {out}")
    return verdict.exit_code


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return ""
    if unit == "share":
        return f"{value:.1%}"
    return f"{value:.4g}"


def _row(c: Check) -> list[str]:
    if c.kind == "relative":
        delta = f"{c.delta_pct:+.1f}%"
        interval = f"{c.ci_low_pct:+.1f}% .. {c.ci_high_pct:+.1f}%"
        threshold = f"{'-' if c.direction == 'higher_is_better' else '+'}{c.threshold:g}%"
    else:
        delta = ""
        interval = f"{c.ci_low:.3g} .. {c.ci_high:.3g}" if c.ci_low is not None else ""
        threshold = f"{'>=' if c.direction == 'higher_is_better' else '<='} {_fmt(c.threshold, c.unit)}"
    return [c.label, _fmt(c.base, c.unit), _fmt(c.head, c.unit), delta, interval, threshold, c.outcome.value]


def render(v: Verdict) -> str:
    """The verdict line first, then every check, then errors, notes and advice."""
    lines = [v.headline, ""]
    if v.checks:
        headers = ["metric", "base", "head", "delta", "interval", "threshold", "outcome"]
        lines.append(tabulate([_row(c) for c in v.checks], headers=headers, disable_numparse=True))
    for title, items in (("errors", v.errors), ("notes", v.notes), ("advice", v.advice)):
        if items:
            lines += ["", f"{title}:"] + [f"  - {item}" for item in items]
    return "\n".join(lines)


def _update(args) -> int:
    path = _results_path(args.results)
    results = load_results(path)
    branch = args.branch or os.environ.get("GITHUB_REF_NAME")
    why = bl.refuse_branch(branch, args.default_branch, args.force_branch)
    if why:
        raise GateError(f"baseline not updated: {why}")
    verdict = compare_results(results, None, None, results.plan.thresholds)
    if verdict.errors:
        raise GateError(
            "baseline not updated: the results are not fit to be a baseline:\n"
            + "\n".join(f"  - {e}" for e in verdict.errors)
        )
    figures, units = results_figures(results)
    commit = args.commit or os.environ.get("GITHUB_SHA") or results.fingerprint.vllm_commit
    provenance = bl.Provenance(
        kind="measured", date=bl.today(), commit=commit, branch=branch,
        source=f"gate baseline update (gate {results.gate_version})", results=str(path),
    )
    written = bl.update_baseline(args.baselines_dir, results, figures, provenance, units)
    print(f"wrote baseline {written} ({len(figures)} figures, plan {results.plan.name}, "
          f"{results.fingerprint.hardware_key})")
    if verdict.outcome.value == "fail":
        print(f"warning: the recorded run fails an absolute check: {verdict.headline}")
    return EXIT_PASS

