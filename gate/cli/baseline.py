"""`gate baseline update`: record a default-branch run as the stored baseline."""

from __future__ import annotations

from pathlib import Path

from gate.core.errors import EXIT_BAD_INPUT, EXIT_PASS, GateError
from gate.core.settings import Settings
from gate.core.store import today
from gate.judge import baseline as bl
from gate.judge.checks import results_figures
from gate.judge.compare import BaselineReference, NoReference, compare_results
from gate.judge.noise import noise_dirs, noise_for, runner_key
from gate.judge.verdict import Verdict
from gate.measure.results import Results, load_results, results_path


def add_parser(sub) -> None:
    b = sub.add_parser("baseline", help="manage stored baselines")
    bsub = b.add_subparsers(dest="baseline_command", metavar="ACTION")
    u = bsub.add_parser(
        "update",
        help="record RESULTS as the baseline for their plan, hardware and model",
        description="Write or refresh the baseline for these results (the old figures go to the "
        "file's history). Refuses results that are incomplete, broken or not from the default "
        "branch.",
    )
    u.add_argument("results", metavar="RESULTS", help="results.json, or a folder holding one")
    u.add_argument("--baselines-dir", default="baselines", type=Path)
    u.add_argument("--branch", help="branch the results come from (default: $GITHUB_REF_NAME)")
    u.add_argument("--default-branch", default="main",
                   help="the only branch baselines come from (default main)")
    u.add_argument("--commit", help="commit measured (default: $GITHUB_SHA, else the vLLM commit)")
    u.add_argument("--force-branch", action="store_true", help="record even from another branch")
    u.add_argument("--detection", type=Path, metavar="FILE",
                   help="changepoints.json of the history with this run (gate history detect): "
                   "refuse when it says this plan and runner stand regressed")
    u.add_argument("--noise-dir", type=Path, action="append",
                   help="where the runner's noise calibrations are (the comparison with the "
                   "stored baseline); default ./baselines/noise and the cache folder's (not "
                   "with GATE_CACHE_CALIBRATIONS=false)")
    u.set_defaults(handler=handle)
    b.set_defaults(handler=lambda args, settings: (b.print_help(), EXIT_BAD_INPUT)[1])


def handle(args, settings: Settings) -> int:
    path = results_path(args.results)
    results = load_results(path)
    branch = args.branch or settings.ref_name
    why = bl.refuse_branch(branch, args.default_branch, args.force_branch)
    if why:
        raise GateError(f"baseline not updated: {why}")
    verdict = compare_results(results, NoReference(), results.plan.thresholds)
    if verdict.errors:
        raise GateError(
            "baseline not updated: the results are not fit to be a baseline:\n"
            + "\n".join(f"  - {e}" for e in verdict.errors)
        )
    decision = _promotion(args, settings, results)
    if not decision.allowed:
        raise GateError("baseline not updated: a regressed run is never promoted:\n"
                        + "\n".join(f"  - {why}" for why in decision.refused))
    figures, units = results_figures(results)
    commit = args.commit or settings.sha or results.fingerprint.vllm_commit
    provenance = bl.Provenance(
        kind="measured", date=today(), commit=commit, branch=branch,
        source=f"gate baseline update (gate {results.gate_version})", results=str(path),
        gate_version=results.gate_version, note="; ".join(decision.acknowledged),
    )
    written = bl.update_baseline(args.baselines_dir, results, figures=figures,
                                 provenance=provenance, units=units)
    print(f"wrote baseline {written} ({len(figures)} figures, plan {results.plan.name}, "
          f"{results.fingerprint.hardware_key})")
    for note in decision.acknowledged:
        print(f"note: {note}")
    if verdict.outcome.value == "fail":
        print(f"warning: the recorded run fails an absolute check: {verdict.headline}")
    return EXIT_PASS


def _promotion(args, settings: Settings, results: Results):
    """The run against the stored baseline it would replace, and the history's detection."""
    from gate.history.model import load_detection
    from gate.history.promotion import promotion

    comparison: Verdict | None = None
    existing = bl.existing_for(args.baselines_dir, results) if args.baselines_dir.is_dir() \
        else None
    if existing is not None and not bl.mismatches(existing[1], results):
        cache = settings.calibration_cache()
        noise = noise_for(noise_dirs(args.noise_dir, cache), results.plan.name,
                          results.plan_hash, results.fingerprint)
        comparison = compare_results(results, BaselineReference(existing[1], str(existing[0])),
                                     results.plan.thresholds, noise=noise)
    detection = load_detection(args.detection) if args.detection else None
    return promotion(comparison, detection, plan=results.plan.name,
                     runner_class=runner_key(results.fingerprint))
