"""Judge a run: head results against the base build's results (A/B), a stored baseline, or
alone. Pure functions from typed models to a `Verdict`; the method is docs/compare.md.

- A/B: each round r of both builds gives, per check, the paired log ratio
  d_r = log(head_r / base_r) of two cells measured next to each other. The interval of its
  mean pools the runner's noise profile (gate calibrate) with the run's own spread
  (gate.judge.sequential), at the confidence the sequential design spends on this look; the looks
  are replayed round by round, so `gate compare` on the files gives the verdict `gate ab`
  stopped on. The structured-output overhead is judged the same way: head's guided/free TPOT
  ratio against base's, round by round, so drift that hits both arms cancels.
- baseline: head's repeats against the stored figures, unpaired (gate.judge.sequential).
- alone (or against a baseline): the guided/free TPOT ratio against an absolute bound.
- validity and integrity (gate.judge.run_validity): a broken measurement is `error`, never pass.

fail: the whole interval is past the threshold in the bad direction; pass: its bad end is
within the threshold; inconclusive: it straddles the threshold.
"""

from __future__ import annotations

import math

import numpy as np

from gate.core.errors import GateError
from gate.judge import sequential as seq
from gate.judge.baseline import Baseline, Figure, mismatches
from gate.judge.checks import LOWER, Slot, judged, per_repeat, ratio_slots, slots
from gate.judge.noise import Noise, Prior, prior_for
from gate.judge.run_validity import ab_errors, integrity_errors, runner_findings, validity_checks
from gate.judge.verdict import Check, Outcome, Verdict, worst
from gate.measure.results import Results
from gate.plan.thresholds import Thresholds
from gate.runner.fingerprint import warnings_for


def _prior(noise: Noise, thresholds: Thresholds, on_gpu: bool, name: str, paired: bool) -> Prior:
    return prior_for(noise.profile, name, thresholds.run_noise_for(on_gpu), paired=paired,
                     label=noise.description)


def _check(slot: Slot, threshold: float, interval: seq.Interval, outcome: Outcome, **kw) -> Check:
    return Check(
        name=slot.name, label=slot.label, kind="relative", direction=slot.metric.direction,
        unit=slot.metric.unit, concurrency=slot.concurrency, arm=slot.arm,
        delta_pct=interval.mean_pct, ci_low_pct=interval.lo_pct, ci_high_pct=interval.hi_pct,
        threshold=threshold, outcome=outcome, **kw)


# ---------------------------------------------------------------- A/B: paired rounds


def paired_checks(head: Results, base: Results, found: list[Slot], thresholds: Thresholds,
                  noise: Noise, design: seq.SequentialDesign, looks: int) -> list[Check]:
    """Replay the sequential test look by look over the rounds both builds measured."""
    on_gpu = bool(head.fingerprint.gpus)
    pairs: dict[str, list[tuple[float, float]]] = {}
    specs = []
    for slot in found:
        h, b = per_repeat(head, slot), per_repeat(base, slot)
        pairs[slot.name] = [(b[r], h[r]) for r in sorted(set(h) & set(b))]
        prior = _prior(noise, thresholds, on_gpu, slot.name, paired=True)
        specs.append(seq.CheckSpec(slot.name, slot.threshold(thresholds), slot.metric.direction,
                                   prior.sigma, prior.df, prior.source))
    state = seq.start(design, specs)
    for look in range(1, looks + 1):
        upto = look if look < looks else None  # the last look sees every round
        state = seq.observe(state, {name: [math.log(hv / bv) for bv, hv in p[:upto]]
                                    for name, p in pairs.items() if p[:upto]})
    out = []
    for slot, spec in zip(found, specs, strict=True):
        cs, p = state.checks[spec.name], pairs[slot.name]
        if not p:
            continue
        d = [math.log(hv / bv) for bv, hv in p]
        noisier = seq.spread_exceeds_prior(d, spec.prior_sigma, spec.prior_df)
        out.append(_check(
            slot, spec.threshold_pct, cs.interval, cs.outcome,
            base=float(np.exp(np.mean(np.log([bv for bv, _ in p])))),
            head=float(np.exp(np.mean(np.log([hv for _, hv in p])))),
            head_n=len(p), base_n=len(p), decided_at_round=cs.decided_at,
            interval_source=f"{len(p)} paired round(s); prior: {spec.prior_source}"
            + ("; the spread of this run exceeds the prior" if cs.disjoint or noisier else ""),
            note="this run is noisier than its noise profile: run gate calibrate again"
            if noisier else "",
        ))
    return out


# ---------------------------------------------------------------- baseline: unpaired


def _baseline_sample(figure: Figure) -> seq.LogSample:
    if figure.values:
        return seq.log_sample(figure.values)
    return seq.log_sample_from_moments(float(figure.mean), figure.std, figure.n or 1)


def baseline_checks(head: Results, baseline: Baseline, found: list[Slot], thresholds: Thresholds,
                    noise: Noise, confidence: float, notes: list[str]) -> list[Check]:
    on_gpu = bool(head.fingerprint.gpus)
    out = []
    for slot in found:
        figure = baseline.figures[slot.name]
        values = list(per_repeat(head, slot).values())
        if not values:
            continue
        prior = _prior(noise, thresholds, on_gpu, slot.name, paired=False)
        interval = seq.unpaired_interval(seq.log_sample(values), _baseline_sample(figure),
                                         prior.sigma, prior.df, confidence)
        threshold = slot.threshold(thresholds)
        out.append(_check(
            slot, threshold, interval, seq.decide(interval, threshold, slot.metric.direction),
            base=figure.point, head=float(np.mean(values)), head_n=len(values),
            base_n=figure.count, interval_source=f"head: {len(values)} repeat(s), baseline: "
            f"{figure.count} value(s); prior: {prior.source}",
        ))
    return out


# ---------------------------------------------------------------- absolute ratio bound


def ratio_bound_checks(head: Results, thresholds: Thresholds, noise: Noise, confidence: float
                       ) -> list[Check]:
    """The head's guided/free TPOT ratio per level against an absolute bound."""
    bound = thresholds.guided_free_tpot_ratio
    on_gpu = bool(head.fingerprint.gpus)
    out = []
    for slot in ratio_slots(head, thresholds):
        values = list(per_repeat(head, slot).values())
        if not values or bound is None:
            continue
        # Two cells (guided, free) behind each ratio: the spread of a pair.
        prior = _prior(noise, thresholds, on_gpu, slot.name, paired=True)
        sample = seq.log_sample(values)
        # One sample against a fixed bound: the t interval of the mean log ratio, its spread
        # pooled from the prior and the repeats (as paired_interval does for rounds' d).
        _, lo, hi = seq.paired_interval([math.log(v) for v in values], prior.sigma, prior.df,
                                        confidence)
        lo_x, hi_x = 1 + lo / 100, 1 + hi / 100
        outcome = Outcome.FAIL if lo_x > bound else Outcome.PASS if hi_x <= bound else \
            Outcome.INCONCLUSIVE
        out.append(Check(
            name=f"bound.c{slot.concurrency}.tpot_p50", label=f"guided/free TPOT p50 "
            f"(c={slot.concurrency}) bound", kind="absolute", direction=LOWER, unit="x",
            concurrency=slot.concurrency, arm="guided", head=float(math.exp(sample.mean)),
            ci_low=lo_x, ci_high=hi_x, threshold=bound, outcome=outcome, head_n=len(values),
            interval_source=f"{len(values)} repeat(s); prior: {prior.source}",
        ))
    return out


# ---------------------------------------------------------------- the verdict


METHOD = (
    "Each check's interval is a Student t interval on the mean log ratio whose variance pools "
    "the runner's noise profile ({noise}) with this run's own spread (docs/compare.md). A/B: "
    "rounds are paired (head and base cells measured next to each other), looks are replayed "
    "round by round, and each look's interval is taken at the confidence the sequential "
    "design spends on it: {conf:.0%} overall, simultaneous over the {k} judged checks and "
    "{looks} planned looks (spending alpha*(i/L)^2), so stopping early cannot inflate false "
    "fails. fail: the whole interval is past the threshold in the bad direction; pass: its "
    "bad end is within the threshold; inconclusive: it straddles the threshold. Invalid JSON, "
    "length finishes, failed requests, coalesced streams or an incomplete run: error."
)


def compare_results(
    head: Results,
    base: Results | None,
    baseline: Baseline | None,
    thresholds: Thresholds,
    *,
    noise: Noise | None = None,
    head_path: str | None = None,
    base_path: str | None = None,
    baseline_path: str | None = None,
) -> Verdict:
    """The verdict on `head`: against `base` results (A/B, paired rounds; replayed look by
    look when gate ab measured them sequentially), a stored `baseline`, or, with neither, only
    the absolute checks (guided/free ratio bound, validity)."""
    if base is not None and baseline is not None:
        raise GateError("compare against base results or a baseline, not both")
    noise = noise or Noise()
    mode = "ab" if base is not None else "baseline" if baseline is not None else "absolute"
    errors = integrity_errors(head, "head")
    validity, validity_errs = validity_checks(head, thresholds, "head")
    errors += validity_errs
    notes: list[str] = []
    mismatch: list[str] = []
    if base is not None:
        errors += integrity_errors(base, "base") + validity_checks(base, thresholds, "base")[1]
        mismatch = ab_errors(head, base)
    if baseline is not None:
        where = f" ({baseline_path})" if baseline_path else ""
        mismatch = [f"baseline{where} does not match the head run: {m}"
                    for m in mismatches(baseline, head)]
        if baseline.provenance.kind == "reported":
            notes.append(
                "the baseline's figures are reported from a public source "
                f"({baseline.provenance.url or baseline.provenance.source}), not measured by "
                "this plan: a difference may also come from the harness")
    errors += mismatch
    max_looks = (head.sequential_rounds if base is not None and head.sequential_rounds
                 and base.sequential_rounds == head.sequential_rounds else 1)
    checks, family = _judge(head, base, baseline, thresholds, noise, max_looks, bool(mismatch),
                            notes)
    doctor_errors, warnings = _runner_notes(head, base)
    errors += doctor_errors
    verdict = Verdict(
        outcome=Outcome.ERROR if errors else worst([c.outcome for c in checks + validity]),
        headline="", mode=mode, head_results=head_path, base_results=base_path,
        baseline=baseline_path, checks=checks + validity, errors=errors, notes=notes,
        warnings=warnings, thresholds=thresholds.model_dump(mode="json"),
        noise_profile=noise.description,
        method=METHOD.format(noise=noise.description, conf=thresholds.confidence, k=family,
                             looks=max_looks),
        rounds=len({c.repeat for c in head.cells}) if base is not None else None,
    )
    verdict.headline = headline(verdict)
    verdict.advice = advice(verdict)
    return verdict


def _runner_notes(head: Results, base: Results | None) -> tuple[list[str], list[str]]:
    """(errors, warnings) about the runners: the fingerprints' warnings and the doctor's."""
    errors, warnings = [], warnings_for(head.fingerprint)
    if base is not None:
        warnings += [f"base: {w}" for w in warnings_for(base.fingerprint)]
    for who, res in (("head", head), ("base", base)):
        if res is not None:
            doctor_errors, doctor_warnings = runner_findings(res, who)
            errors += doctor_errors
            warnings += doctor_warnings
    return errors, warnings


def _judge(head, base, baseline, thresholds, noise, max_looks, mismatched, notes
           ) -> tuple[list[Check], int]:
    """(checks, family size): the relative checks the mode allows, then the bounds. With one
    planned look, all rounds are judged at once; with more, round r is look r."""
    found = judged(slots(head), thresholds)
    if base is not None:
        found += judged(ratio_slots(head, thresholds), thresholds)
    elif baseline is not None:
        for slot in found:
            if slot.name not in baseline.figures:
                notes.append(f"{slot.label}: the baseline has no figure for {slot.name}; "
                             "not compared")
        found = [s for s in found if s.name in baseline.figures]
    bounds = [] if base is not None or thresholds.guided_free_tpot_ratio is None else \
        ratio_slots(head, thresholds)
    family = max(len(found) + len(bounds), 1)
    rounds = len({c.repeat for c in head.cells})
    design = seq.SequentialDesign(max(max_looks, 1), family, thresholds.confidence)
    confidence = design.confidence_at(1)
    checks: list[Check] = []
    if not mismatched and base is not None:
        looks = min(rounds, max_looks) if max_looks > 1 else 1
        checks = paired_checks(head, base, found, thresholds, noise, design, looks)
        notes.append("guided/free ratio judged against the base build's (paired overhead), "
                     "not against the absolute bound")
    elif not mismatched and baseline is not None:
        checks = baseline_checks(head, baseline, found, thresholds, noise, confidence, notes)
    if base is None and baseline is None:
        notes.append("no baseline and no base results: only the guided/free ratio bound and "
                     "validity were checked")
    if thresholds.guided_free_tpot_ratio is None and base is None:
        notes.append("guided/free TPOT ratio bound disabled (guided_free_tpot_ratio is null)")
    checks += ratio_bound_checks(head, thresholds, noise, confidence) if bounds else []
    return checks, family


def _describe(c: Check) -> str:
    if c.kind == "relative":
        return (f"{c.label} {c.delta_pct:+.1f}% (interval {c.ci_low_pct:+.1f}% to "
                f"{c.ci_high_pct:+.1f}%, threshold {c.threshold:g}%)")
    if c.kind == "absolute":
        return (f"{c.label} {c.head:.2f}x (interval {c.ci_low:.2f} to {c.ci_high:.2f}, "
                f"bound {c.threshold:g})")
    return f"{c.label} {c.head:g} (threshold {c.threshold:g})"


def headline(v: Verdict) -> str:
    if v.outcome == Outcome.ERROR:
        more = f" (+{len(v.errors) - 1} more)" if len(v.errors) > 1 else ""
        first = v.errors[0] if v.errors else "a check could not be judged"
        return f"ERROR: the measurement cannot be judged: {first}{more}"
    bad = [c for c in v.checks if c.outcome == v.outcome]
    bad = ttft_first(bad) if v.outcome == Outcome.FAIL else bad
    more = f"; {len(bad) - 1} more" if len(bad) > 1 else ""
    if v.outcome == Outcome.FAIL:
        what = "time to first token: " if is_ttft(bad[0]) else ""
        return f"FAIL: {what}{_describe(bad[0])}{more}"
    if v.outcome == Outcome.INCONCLUSIVE:
        return f"INCONCLUSIVE: {_describe(bad[0])} straddles the threshold{more}"
    if not v.checks:
        return "PASS: nothing to judge"
    lead = next((c for c in v.checks if c.kind != "validity"), v.checks[0])
    return f"PASS: {len(v.checks)} checks within thresholds; {_describe(lead)}"


def is_ttft(c: Check) -> bool:
    return "ttft" in c.name


def ttft_first(checks: list[Check]) -> list[Check]:
    """Time-to-first-token checks lead: a compile or grammar-cache regression moves them
    first and most, and per-token figures would hide it (stable order otherwise)."""
    return sorted(checks, key=lambda c: not is_ttft(c))


def advice(v: Verdict) -> list[str]:
    out = []
    if v.outcome == Outcome.INCONCLUSIVE:
        out.append(
            "The noise is wider than the threshold. Run more rounds (gate ab --max-rounds, or "
            "a larger --budget-minutes), measure this runner's noise with gate calibrate if "
            "the verdict used the fallback constant, or lengthen the cells (sweep.window_s).")
    if v.outcome == Outcome.FAIL:
        out.append("A slowdown beyond the threshold: see the failing checks.")
    if any(is_ttft(c) and c.outcome == Outcome.FAIL for c in v.checks):
        out.append(
            "Guided requests wait longer for their first token: look at grammar compilation "
            "and the grammar cache (vllm/v1/structured_output/, the backend's compiler); "
            "'Where the wait is' says whether the time is spent waiting for the grammar.")
    if any("not valid JSON" in e for e in v.errors):
        out.append(
            "Outputs did not follow the schema: check that the request field is still honoured "
            "(response_format json_schema or structured_outputs) and that the backend is set.")
    return out
