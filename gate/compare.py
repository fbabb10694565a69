"""Judge a run: head results against a baseline or the base build's results (A/B), or alone.

Pure functions from typed models to a `Verdict`; no printing and no files (compare_cli.py
does that). The statistics are in stats.py, the method in docs/compare.md.

Checks:
- relative (needs a base): drain req/min and output tok/s (lower is worse); per sweep level,
  guided arm: TPOT p50, TPOT p99, ITL p99 (higher is worse). Each gets a bootstrap interval of
  the relative change; `fail` only when the whole interval is past the threshold.
- absolute (head alone): guided/free TPOT p50 per level from `ratio_min_concurrency` up.
- validity and integrity: invalid guided JSON, finish_reason=length, failed requests, an
  incomplete or errored run, an empty cell. Any of these makes the verdict `error`: the
  measurement is broken and says nothing about speed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gate import stats
from gate.baseline import Baseline, Figure, mismatches
from gate.errors import GateError
from gate.fingerprint import warnings_for
from gate.metrics import tpot_s
from gate.results import CellKey, CellSummary, RequestRecord, Results
from gate.stats import Estimate
from gate.thresholds import Thresholds
from gate.verdict import Check, Outcome, Verdict, worst

HIGHER = "higher_is_better"
LOWER = "lower_is_better"


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    direction: str
    threshold_field: str
    phase: str
    get: Callable[[CellSummary], float | None]
    # how one run's cell is resampled: "request" / "token" (drain, Little's law),
    # "tpot" / "itl" (pooled quantile `quantile` of per-request values)
    resample: str
    quantile: float | None = None


def _dist(attr: str, stat: str) -> Callable[[CellSummary], float | None]:
    def get(cell: CellSummary) -> float | None:
        dist = getattr(cell, attr)
        return getattr(dist, stat) if dist is not None and dist.count > 0 else None

    return get


DRAIN_METRICS = (
    Metric("req_per_min", "drain req/min", "req/min", HIGHER, "drain_throughput_pct", "drain",
           lambda c: c.requests_per_min, "request"),
    Metric("output_tok_s", "drain output tok/s", "tok/s", HIGHER, "drain_throughput_pct", "drain",
           lambda c: c.output_throughput, "token"),
)
SWEEP_METRICS = (
    Metric("tpot_p50_ms", "TPOT p50", "ms", LOWER, "tpot_p50_pct", "sweep", _dist("tpot_ms", "p50"), "tpot", 0.50),
    Metric("tpot_p99_ms", "TPOT p99", "ms", LOWER, "tpot_p99_pct", "sweep", _dist("tpot_ms", "p99"), "tpot", 0.99),
    Metric("itl_p99_ms", "ITL p99", "ms", LOWER, "itl_p99_pct", "sweep", _dist("itl_ms", "p99"), "itl", 0.99),
)


@dataclass(frozen=True)
class Slot:
    """One figure to compare: a metric at a concurrency level (the drain's own level)."""

    metric: Metric
    concurrency: int

    @property
    def name(self) -> str:
        if self.metric.phase == "drain":
            return f"drain.{self.metric.key}"
        return f"sweep.c{self.concurrency}.{self.metric.key}"

    @property
    def label(self) -> str:
        if self.metric.phase == "drain":
            return f"{self.metric.label} (guided)"
        return f"{self.metric.label} (guided, c={self.concurrency})"


def slots(results: Results) -> list[Slot]:
    """Every relative figure the results can provide: the drain, and each guided sweep level."""
    index = results.index()
    out = []
    for level in index.levels("drain", "guided")[:1]:
        out += [Slot(m, level) for m in DRAIN_METRICS]
    for level in index.levels("sweep", "guided"):
        out += [Slot(m, level) for m in SWEEP_METRICS]
    return out


def _cells(results: Results, slot: Slot) -> list[CellSummary]:
    cells = results.cells_of(slot.metric.phase, "guided", slot.concurrency)
    return sorted((c for c in cells if c.completed > 0), key=lambda c: c.repeat)


def per_repeat_values(results: Results, slot: Slot) -> list[float]:
    values = [slot.metric.get(c) for c in _cells(results, slot)]
    return [float(v) for v in values if v is not None and v > 0]


def results_figures(results: Results) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Per-repeat values of every relative figure, and their units (for `gate baseline update`)."""
    figures, units = {}, {}
    for slot in slots(results):
        values = per_repeat_values(results, slot)
        if values:
            figures[slot.name] = values
            units[slot.name] = slot.metric.unit
    return figures, units


# ---------------------------------------------------------------- estimates


def _request_replicates(
    records: list[RequestRecord], metric: Metric, point: float, rng: np.random.Generator, samples: int
) -> np.ndarray | None:
    """One run's cell resampled by request, as replicates of `point`; None when the records
    cannot support it (fewer than 2 usable requests)."""
    if metric.resample in ("request", "token"):
        usable = [r for r in records if r.e2el_s and r.e2el_s > 0 and r.output_tokens is not None]
        if len(usable) < 2:
            return None
        factors = stats.little_factors(
            [r.e2el_s for r in usable], [r.output_tokens for r in usable], rng, metric.resample, samples
        )
        return point * factors
    if metric.resample == "tpot":
        groups = [[v * 1000.0] for v in map(tpot_s, records) if v is not None and v > 0]
    else:
        groups = [[g * 1000.0 for g in r.itl_s] for r in records if r.itl_s]
    if len(groups) < 2:
        return None
    reference, reps = stats.bootstrap_pooled_quantile(groups, metric.quantile, rng, samples)
    if not reference or not np.isfinite(reference) or reference <= 0 or np.any(reps <= 0):
        return None
    return point * reps / reference


def estimate_results(
    results: Results, slot: Slot, rng: np.random.Generator, samples: int = stats.DEFAULT_SAMPLES
) -> Estimate | None:
    cells = [c for c in _cells(results, slot) if (v := slot.metric.get(c)) is not None and v > 0]
    if not cells:
        return None
    values = [float(slot.metric.get(c)) for c in cells]
    point = float(np.mean(values))
    if len(values) >= 2:
        reps = stats.bootstrap_mean(values, rng, samples)
        return Estimate(point, reps, len(values), f"{len(values)} repeats")
    records = results.index().records(cells[0].key, ok_only=True)
    reps = _request_replicates(records, slot.metric, point, rng, samples)
    if reps is None:
        return Estimate(point, stats.constant(point, samples), 1, "1 repeat, no records")
    return Estimate(point, reps, 1, f"1 repeat, {len(records)} requests")


def estimate_figure(figure: Figure, rng: np.random.Generator, samples: int = stats.DEFAULT_SAMPLES) -> Estimate:
    if figure.values and len(figure.values) >= 2:
        reps = stats.bootstrap_mean(figure.values, rng, samples)
        return Estimate(figure.point, reps, len(figure.values), f"{len(figure.values)} stored repeats")
    if figure.values:
        return Estimate(figure.point, stats.constant(figure.point, samples), 1, "1 stored value")
    n, std = figure.n or 1, figure.std or 0.0
    reps = stats.lognormal_draws(figure.point, std, n, rng, samples)
    return Estimate(figure.point, reps, n, f"stored mean, std {std:g}, n={n}")


# ---------------------------------------------------------------- decisions


def judge_relative(delta: float, lo: float, hi: float, threshold: float, direction: str) -> Outcome:
    """fail: the whole interval is worse than the threshold; pass: its bad end is within the
    threshold; inconclusive: it straddles the threshold."""
    bad_lo, bad_hi = (-hi, -lo) if direction == HIGHER else (lo, hi)
    if bad_lo > threshold:
        return Outcome.FAIL
    if bad_hi <= threshold:
        return Outcome.PASS
    return Outcome.INCONCLUSIVE


def judge_bound(lo: float, hi: float, bound: float) -> Outcome:
    """For an upper bound on a head-only figure."""
    if lo > bound:
        return Outcome.FAIL
    if hi <= bound:
        return Outcome.PASS
    return Outcome.INCONCLUSIVE


class _Base:
    """The base side: A/B results or a stored baseline."""

    def __init__(self, results: Results | None, baseline: Baseline | None):
        self.results, self.baseline = results, baseline

    def has(self, slot: Slot) -> bool:
        if self.results is not None:
            return bool(per_repeat_values(self.results, slot))
        return slot.name in self.baseline.figures

    def estimate(self, slot: Slot, rng: np.random.Generator, samples: int) -> Estimate | None:
        if self.results is not None:
            return estimate_results(self.results, slot, rng, samples)
        figure = self.baseline.figures.get(slot.name)
        return estimate_figure(figure, rng, samples) if figure else None


def relative_checks(
    head: Results, base: _Base, thresholds: Thresholds, confidence: float, samples: int, notes: list[str]
) -> list[Check]:
    floor = thresholds.run_noise_for(bool(head.fingerprint.gpus))
    checks = []
    for slot in slots(head):
        rng = stats.rng_for(slot.name)
        h = estimate_results(head, slot, rng, samples)
        b = base.estimate(slot, rng, samples)
        if h is None:
            continue
        if b is None:
            notes.append(f"{slot.label}: the base has no figure for {slot.name}; not compared")
            continue
        threshold = getattr(thresholds, slot.metric.threshold_field)
        delta, lo, hi = stats.relative_interval(h, b, confidence, floor, rng)
        outcome = judge_relative(delta, lo, hi, threshold, slot.metric.direction)
        checks.append(
            Check(
                name=slot.name, label=slot.label, kind="relative", direction=slot.metric.direction,
                unit=slot.metric.unit, concurrency=slot.concurrency, arm="guided",
                base=b.point, head=h.point, delta_pct=delta, ci_low_pct=lo, ci_high_pct=hi,
                threshold=threshold, outcome=outcome, head_n=h.n, base_n=b.n,
                interval_source=f"head: {h.source}; base: {b.source}",
            )
        )
    return checks


def _ratio_estimate(head: Results, level: int, rng: np.random.Generator, samples: int) -> Estimate | None:
    """The head's guided/free TPOT p50 ratio at `level` (metrics.level_ratios computed it per
    repeat), with bootstrap replicates from its repeats or, for one repeat, its requests."""
    ratios = [(r.repeat, r.tpot_p50_ratio) for r in head.ratios
              if r.concurrency == level and r.tpot_p50_ratio]
    if not ratios:
        return None
    values = [v for _, v in ratios]
    point = float(np.mean(values))
    if len(values) >= 2:
        return Estimate(point, stats.bootstrap_mean(values, rng, samples), len(values), f"{len(values)} repeats")
    index, repeat = head.index(), ratios[0][0]
    metric = SWEEP_METRICS[0]  # TPOT p50
    g_reps, f_reps = (
        _request_replicates(index.records(CellKey("sweep", arm, level, repeat), ok_only=True),
                            metric, 1.0, rng, samples)
        for arm in ("guided", "free")
    )
    if g_reps is None or f_reps is None:
        return Estimate(point, stats.constant(point, samples), 1, "1 repeat, no records")
    return Estimate(point, point * g_reps / f_reps, 1, "1 repeat, requests resampled")


def ratio_levels(head: Results, thresholds: Thresholds) -> list[int]:
    if thresholds.guided_free_tpot_ratio is None:
        return []
    levels = head.index().levels("sweep", "guided")
    return [lv for lv in levels if lv >= thresholds.ratio_min_concurrency]


def ratio_checks(
    head: Results, thresholds: Thresholds, confidence: float, samples: int, notes: list[str]
) -> list[Check]:
    bound = thresholds.guided_free_tpot_ratio
    if bound is None:
        notes.append("guided/free TPOT ratio check disabled (guided_free_tpot_ratio is null)")
        return []
    floor = thresholds.run_noise_for(bool(head.fingerprint.gpus))
    checks = []
    for level in ratio_levels(head, thresholds):
        name = f"ratio.c{level}.tpot_p50"
        rng = stats.rng_for(name)
        est = _ratio_estimate(head, level, rng, samples)
        if est is None:
            notes.append(f"guided/free TPOT p50 at c={level}: no free arm measured; ratio not checked")
            continue
        # two cells (guided, free) behind each ratio: twice the variance of one
        lo, hi = stats.absolute_interval(est, confidence, floor, rng, np.sqrt(2))
        checks.append(
            Check(
                name=name, label=f"guided/free TPOT p50 (c={level})", kind="absolute", direction=LOWER,
                unit="x", concurrency=level, arm="guided", head=est.point, ci_low=lo, ci_high=hi,
                threshold=bound, outcome=judge_bound(lo, hi, bound), head_n=est.n,
                interval_source=f"head: {est.source}",
            )
        )
    return checks


# ---------------------------------------------------------------- validity and integrity


def integrity_errors(results: Results, who: str) -> list[str]:
    """Why the measurement in `results` cannot be judged at all (empty when it can)."""
    out = []
    if results.status != "complete":
        out.append(f"{who} run status is {results.status!r}, not complete")
    out += [f"{who} run error: {e}" for e in results.errors]
    measured = [c for c in results.cells if c.phase in ("drain", "sweep")]
    if not measured:
        out.append(f"{who} results hold no measured cells")
    failed = [c for c in measured if c.failed > 0]
    if failed:
        total = sum(c.failed for c in failed)
        where = ", ".join(f"{c.key.label}: {c.failed}" for c in failed[:6])
        sample = next((r.error for r in results.records if r.error and r.phase != "warmup"), None)
        out.append(
            f"{who}: {total} request(s) failed ({where})" + (f"; first error: {sample[:200]}" if sample else "")
        )
    for c in measured:
        if c.completed == 0:
            out.append(f"{who}: cell {c.key.label} completed no requests")
    return out


def validity_checks(results: Results, thresholds: Thresholds, who: str = "head") -> tuple[list[Check], list[str]]:
    guided = [c for c in results.cells if c.arm == "guided" and c.phase in ("drain", "sweep")]
    completed = sum(c.completed for c in guided)
    if not completed:
        return [], []
    errors = []
    checked = sum(c.valid_outputs + c.invalid_outputs for c in guided)
    valid = sum(c.valid_outputs for c in guided)
    share = valid / completed
    if checked < completed:
        errors.append(
            f"{who}: only {checked} of {completed} guided outputs were validated against their schema"
        )
    if share < thresholds.validity_min:
        errors.append(
            f"{who}: {completed - valid} of {completed} guided outputs are not valid JSON for their "
            f"schema ({share:.1%} valid, {thresholds.validity_min:.0%} required): the grammar was not "
            "applied or the output was cut off"
        )
    lengths = sum(c.length_finishes for c in guided)
    if lengths > thresholds.max_length_finishes:
        errors.append(
            f"{who}: {lengths} guided request(s) ended with finish_reason=length "
            f"(allowed {thresholds.max_length_finishes}): raise max_tokens or fix the schema"
        )
    failed = sum(c.failed for c in results.cells if c.phase in ("drain", "sweep"))
    bad_share = share < thresholds.validity_min or checked < completed
    checks = [
        Check(name="validity.guided_valid_share", label="valid guided JSON share", kind="validity",
              direction=HIGHER, unit="share", head=share, threshold=thresholds.validity_min,
              outcome=Outcome.ERROR if bad_share else Outcome.PASS,
              note=f"{valid}/{completed} valid"),
        Check(name="validity.guided_length_finishes", label="guided finish_reason=length",
              kind="validity", direction=LOWER, unit="requests", head=float(lengths),
              threshold=float(thresholds.max_length_finishes),
              outcome=Outcome.ERROR if lengths > thresholds.max_length_finishes else Outcome.PASS),
        Check(name="requests.failed", label="failed requests", kind="validity", direction=LOWER,
              unit="requests", head=float(failed), threshold=0.0,
              outcome=Outcome.ERROR if failed else Outcome.PASS),
    ]
    return checks, errors


def ab_errors(head: Results, base: Results) -> list[str]:
    """Why head and base results are not comparable, naming each difference."""
    out = []
    if head.plan_hash != base.plan_hash:
        diff = plan_differences(base.plan.model_dump(mode="json"), head.plan.model_dump(mode="json"))
        out.append(
            f"plan_hash differs: base {base.plan_hash} (plan {base.plan.name!r}), head {head.plan_hash} "
            f"(plan {head.plan.name!r})" + (f": {'; '.join(diff)}" if diff else "")
        )
    hb, hh = base.fingerprint.hardware_key, head.fingerprint.hardware_key
    if hb != hh:
        out.append(f"hardware differs: base {hb!r}, head {hh!r}")
    return out


def plan_differences(a: dict, b: dict, prefix: str = "", limit: int = 6) -> list[str]:
    """Paths where two plan dumps differ (base value -> head value), for error messages."""
    out: list[str] = []
    for key in sorted(set(a) | set(b)):
        if key in ("repeats", "thresholds", "name", "description"):
            continue
        va, vb, path = a.get(key), b.get(key), f"{prefix}{key}"
        if isinstance(va, dict) and isinstance(vb, dict):
            out += plan_differences(va, vb, path + ".", limit)
        elif va != vb:
            out.append(f"{path}: {va!r} -> {vb!r}")
        if len(out) >= limit:
            break
    return out[:limit]


# ---------------------------------------------------------------- the verdict


METHOD = (
    "Intervals: percentile bootstrap ({samples} replicates, seeded per check) of head/base - 1, "
    "{conf:.0%} simultaneous over the {k} judged checks (Bonferroni: each interval {each:.2%}), "
    "so that one noisy check among many does not fail the verdict by chance. A side with >= 2 repeats resamples its per-repeat figures; a single run "
    "resamples its requests (TPOT/ITL quantiles of the pooled values of resampled requests; drain "
    "throughput by Little's law, in-flight count held fixed); a stored mean/std/n is drawn "
    "log-normally. Each side's log-scale spread is floored at run_noise_pct={floor:g}%/sqrt(n) "
    "for run-to-run noise a single run cannot show. fail: the whole interval is past the "
    "threshold in the bad direction; pass: its bad end is within the threshold; inconclusive: it "
    "straddles the threshold. Guided/free ratio: the same bootstrap of the head's ratio against "
    "the absolute bound. Invalid JSON, length finishes, failed requests or an incomplete run: error."
)


def compare_results(
    head: Results,
    base: Results | None,
    baseline: Baseline | None,
    thresholds: Thresholds,
    *,
    head_path: str | None = None,
    base_path: str | None = None,
    baseline_path: str | None = None,
    samples: int = stats.DEFAULT_SAMPLES,
    look: int = 1,
    max_looks: int = 1,
) -> Verdict:
    """The verdict on `head`: against `base` results (A/B), a stored `baseline`, or, with
    neither, only the absolute checks (guided/free ratio, validity)."""
    if base is not None and baseline is not None:
        raise GateError("compare against base results or a baseline, not both")
    mode = "ab" if base is not None else "baseline" if baseline is not None else "absolute"
    errors = integrity_errors(head, "head")
    validity, validity_errs = validity_checks(head, thresholds, "head")
    errors += validity_errs
    checks: list[Check] = []
    notes: list[str] = []
    mismatch: list[str] = []
    if base is not None:
        errors += integrity_errors(base, "base") + validity_checks(base, thresholds, "base")[1]
        mismatch = ab_errors(head, base)
    if baseline is not None:
        where = f" ({baseline_path})" if baseline_path else ""
        mismatch = [f"baseline{where} does not match the head run: {m}" for m in mismatches(baseline, head)]
        if baseline.provenance.kind == "reported":
            notes.append(
                "the baseline's figures are reported from a public source "
                f"({baseline.provenance.url or baseline.provenance.source}), not measured by this plan: "
                "a difference may also come from the harness"
            )
    errors += mismatch
    compared = mode != "absolute" and not mismatch
    judged = [sl for sl in slots(head) if _Base(base, baseline).has(sl)] if compared else []
    family = len(judged) + len(ratio_levels(head, thresholds))
    # Simultaneous over the checks and over the looks a sequential A/B may take (union bound).
    each = 1.0 - (1.0 - thresholds.confidence) / (max(family, 1) * max(max_looks, 1))
    if compared:
        checks += relative_checks(head, _Base(base, baseline), thresholds, each, samples, notes)
    checks += ratio_checks(head, thresholds, each, samples, notes) + validity
    if mode == "absolute":
        notes.append("no baseline and no base results: only the guided/free ratio and validity were checked")
    warnings = warnings_for(head.fingerprint)
    if base is not None:
        warnings += [f"base: {w}" for w in warnings_for(base.fingerprint)]
    outcome = Outcome.ERROR if errors else worst([c.outcome for c in checks])
    floor = thresholds.run_noise_for(bool(head.fingerprint.gpus))
    applied = thresholds.model_dump(mode="json") | {"run_noise_pct": floor}
    verdict = Verdict(
        outcome=outcome, headline="", mode=mode, head_results=head_path, base_results=base_path,
        baseline=baseline_path, checks=checks, errors=errors, notes=notes, warnings=warnings,
        method=METHOD.format(
            conf=thresholds.confidence, samples=samples, floor=floor, k=max(family, 1), each=each
        ),
        thresholds=applied,
    )
    verdict.headline = headline(verdict)
    verdict.advice = advice(verdict, head)
    return verdict


def _describe(c: Check) -> str:
    if c.kind == "relative":
        return (
            f"{c.label} {c.delta_pct:+.1f}% (interval {c.ci_low_pct:+.1f}% to {c.ci_high_pct:+.1f}%, "
            f"threshold {c.threshold:g}%)"
        )
    if c.kind == "absolute":
        return f"{c.label} {c.head:.2f}x (interval {c.ci_low:.2f} to {c.ci_high:.2f}, bound {c.threshold:g})"
    return f"{c.label} {c.head:g} (threshold {c.threshold:g})"


def headline(v: Verdict) -> str:
    if v.outcome == Outcome.ERROR:
        more = f" (+{len(v.errors) - 1} more)" if len(v.errors) > 1 else ""
        first = v.errors[0] if v.errors else "a check could not be judged"
        return f"ERROR: the measurement cannot be judged: {first}{more}"
    bad = [c for c in v.checks if c.outcome == v.outcome]
    more = f"; {len(bad) - 1} more" if len(bad) > 1 else ""
    if v.outcome == Outcome.FAIL:
        return f"FAIL: {_describe(bad[0])}{more}"
    if v.outcome == Outcome.INCONCLUSIVE:
        return f"INCONCLUSIVE: {_describe(bad[0])} straddles the threshold{more}; rerun with more repeats"
    if not v.checks:
        return "PASS: nothing to judge"
    lead = next((c for c in v.checks if c.kind != "validity"), v.checks[0])
    return f"PASS: {len(v.checks)} checks within thresholds; {_describe(lead)}"


def advice(v: Verdict, head: Results) -> list[str]:
    out = []
    if v.outcome == Outcome.INCONCLUSIVE:
        n = head.plan.repeats
        out.append(
            f"The noise is wider than the threshold. Rerun with more repeats (this run had {n}; "
            f"try --repeats {max(3, 2 * n)}) or confirm with a second run (A/B --confirm pools repeats)."
        )
    if v.outcome == Outcome.FAIL:
        out.append("A slowdown beyond the threshold: see the failing checks; rerun to confirm if in doubt.")
    if any("not valid JSON" in e for e in v.errors):
        out.append(
            "Outputs did not follow the schema: check that the request field is still honoured "
            "(response_format json_schema or structured_outputs) and that the backend is set."
        )
    return out
