"""Judge a run: head results against a reference, which is one of three kinds, each with its
own judge (docs/compare.md):

- `ABReference`: the base build's results from the same runner. Rounds are paired (d_r =
  log(head_r / base_r)), grouped into blocks of one server pair each, and judged by the
  sequential test (gate.judge.sequential) look by look, so `gate compare` on the files
  reaches the verdict `gate ab` stopped on. The structured-output overhead is judged the same
  way: head's guided/free TPOT ratio against base's, round by round.
- `BaselineReference`: a stored baseline; head's repeats against its figures, unpaired.
- `NoReference`: the head alone; the guided/free TPOT ratio against an absolute bound (also
  judged against a baseline).

Validity and integrity (gate.judge.run_validity) come first: a broken measurement is `error`,
never pass. Pure functions from typed models to a `Verdict`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

import numpy as np

from gate.judge import first_cause
from gate.judge import sequential as seq
from gate.judge.baseline import Baseline, Figure, mismatches
from gate.judge.checks import LOWER, Slot, judged, per_repeat, ratio_slots, slots
from gate.judge.improvement import improvements, mark_improvements
from gate.judge.noise import CalibrationDesign, Noise, single_prior
from gate.judge.run_validity import (
    ab_errors,
    drift_warnings,
    integrity_errors,
    machine_warnings,
    runner_findings,
    runner_notes,
    shape_warnings,
    validity_checks,
)
from gate.judge.verdict import (
    SCREENING_SOURCE,
    Check,
    Outcome,
    ReportedFigure,
    Verdict,
    worst,
)
from gate.measure.results import Results
from gate.plan.thresholds import Thresholds
from gate.runner.fingerprint import warnings_for


class Cause(str, Enum):
    """Why a verdict is an error, as data: what the advice is chosen by."""

    INCOMPLETE = "incomplete"  # run status, run errors, failed requests, empty cells
    OFF_SCHEMA = "off_schema"  # guided outputs that do not follow their schema
    NOT_COMPARABLE = "not_comparable"  # other plan, other hardware, a baseline that differs
    RUNNER = "runner"  # the runner doctor's invalidating findings


@dataclass(frozen=True)
class Context:
    """What every judge needs besides its reference."""

    head: Results
    thresholds: Thresholds
    noise: Noise

    @property
    def on_gpu(self) -> bool:
        return bool(self.head.fingerprint.gpus)


@dataclass(kw_only=True)
class Judged:
    """What a judge found: its checks, the family they share, and what it has to say."""

    checks: list[Check] = field(default_factory=list)
    family: int = 1
    errors: list[str] = field(default_factory=list)
    causes: set[Cause] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    validity: list[Check] = field(default_factory=list)
    method: str = ""
    rounds: int | None = None
    # Why the two sides are not comparable at all: the first thing a verdict says.
    mismatch: list[str] = field(default_factory=list)
    reported: list[ReportedFigure] = field(default_factory=list)  # shown, not judged

    def add(self, other: Judged) -> Judged:
        return Judged(checks=self.checks + other.checks, family=max(self.family, other.family),
                      errors=self.errors + other.errors, causes=self.causes | other.causes,
                      notes=self.notes + other.notes, validity=self.validity + other.validity,
                      method=" ".join(m for m in (self.method, other.method) if m),
                      rounds=other.rounds or self.rounds, mismatch=self.mismatch + other.mismatch,
                      reported=self.reported + other.reported)


def _validity(res: Results, thresholds: Thresholds, who: str) -> Judged:
    """Integrity and validity of one side's measurement."""
    integrity = integrity_errors(res, who)
    checks, errors = validity_checks(res, thresholds, who)
    causes = {Cause.INCOMPLETE} if integrity else set()
    if any(c.name == "validity.guided_valid_share" and c.outcome == Outcome.ERROR for c in checks):
        causes.add(Cause.OFF_SCHEMA)
    return Judged(errors=integrity + errors, causes=causes, validity=checks)


def _relative_check(slot: Slot, threshold: float, interval: seq.Interval, outcome: Outcome,
                    **kw) -> Check:
    # An unbounded or uselessly wide interval (a check whose spread rests on one or two blocks
    # of this run's own, its calibration set aside) is kept as none: see bounded_interval.
    bounded = bounded_interval(interval)
    return Check(
        name=slot.name, label=slot.label, kind="relative", direction=slot.metric.direction,
        unit=slot.metric.unit, concurrency=slot.concurrency, arm=slot.arm,
        delta_pct=interval.mean_pct, ci_low_pct=interval.lo_pct if bounded else None,
        ci_high_pct=interval.hi_pct if bounded else None,
        threshold=threshold, outcome=outcome, **kw)


# An interval wider than this factor (high end over low end, as ratios) says nothing about a
# threshold of 10-25%: it is shown as none ("no interval yet"), never as -88% .. +827%.
MAX_SHOWN_SPAN = 4.0


def bounded_interval(interval: seq.Interval) -> bool:
    return bounded_pct(interval.lo_pct, interval.hi_pct)


def bounded_pct(lo: float, hi: float) -> bool:
    """Both ends of an interval of changes in percent finite, the low end above -100% (a
    ratio's log interval at -inf), and the whole within a factor MAX_SHOWN_SPAN."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo <= -100.0:
        return False
    return (1.0 + hi / 100.0) / (1.0 + lo / 100.0) <= MAX_SHOWN_SPAN


# ---------------------------------------------------------------- A/B: the sequential test


AB_METHOD = (
    "A/B, paired rounds in blocks of {block} on one server pair each ({noise}). Per check a "
    "sequential one-sided t test on the blocks' mean log ratios, at most {blocks} blocks, from "
    "block {first} on: fail when the change is past the threshold as stated (a drop for a "
    "throughput), pass when it is below 1.5x the threshold. Its variance is this run's own "
    "spread of block means, pooled with the calibration's when one applies. A verdict fails with "
    "at most {alpha:.0%} at any change up to the thresholds (split over its {family} checks and "
    "every look); a check passes with at most {beta:.0%} at 1.5x its threshold. The first block "
    "can also fail a gross effect (every round past the threshold by a further {gross:.0%}). A "
    "spread check per "
    "check fails a head whose rounds spread more than the base's by more than its threshold. "
    "The interval shown is {shown:.0%}, at the deciding look (not adjusted for stopping). "
    "Invalid JSON, length finishes, failed requests, coalesced streams or an incomplete run: "
    "error.")


@dataclass(frozen=True)
class ABReference:
    """The base build's results, measured on the same runner."""

    base: Results
    path: str | None = None
    mode = "ab"

    def judge(self, ctx: Context) -> Judged:
        out = _validity(self.base, ctx.thresholds, "base")
        out.validity = []  # the verdict lists the head's validity checks
        mismatch = ab_errors(ctx.head, self.base)
        if mismatch:
            out.mismatch += mismatch
            out.causes.add(Cause.NOT_COMPARABLE)
            return out
        found = judged(slots(ctx.head), ctx.thresholds) + \
            judged(ratio_slots(ctx.head, ctx.thresholds), ctx.thresholds)
        design, calibrated = ab_design(ctx.head, self.base, max(len(found), 1))
        paired = {slot.name: self._pairs(ctx, slot) for slot in found}
        priors = {slot.name: ctx.noise.prior(slot.name, calibrated, design.rounds_per_block)
                  for slot in found}
        runner = seq.runner_gauge(
            [np.subtract(*reversed(seq.paired_logs(n, p, design)[1:]))[None, :]
             for n, p in paired.items() if p], [priors[n] for n, p in paired.items() if p],
            design)
        checks = [c for slot in found
                  for c in self._paired(ctx, slot, pairs=paired[slot.name],
                                        prior=priors[slot.name], design=design, runner=runner)]
        notes = ["guided/free ratio judged against the base build's (paired overhead), not "
                 "against the absolute bound"]
        if not ctx.noise.calibrations:
            notes.append(f"no calibration applies ({ctx.noise.description}): each check rests "
                         "on this run's own spread between blocks; a calibration of this runner "
                         "(gate calibrate, or gate calibrate --add of trusted runs) decides "
                         "sooner")
        method = AB_METHOD.format(
            block=design.rounds_per_block, noise=ctx.noise.description, alpha=design.alpha,
            beta=design.beta, blocks=design.max_blocks, first=seq.FIRST_LOOK,
            family=len(found), gross=math.expm1(seq.GROSS_MARGIN), shown=seq.SHOWN_CONFIDENCE)
        rounds = len({c.repeat for c in ctx.head.cells})
        return out.add(Judged(checks=checks, family=len(found), notes=notes, method=method,
                              rounds=rounds))

    def _pairs(self, ctx: Context, slot: Slot) -> list[seq.RoundPair]:
        h, b = per_repeat(ctx.head, slot), per_repeat(self.base, slot)
        return [seq.RoundPair(r, b[r], h[r]) for r in sorted(set(h) & set(b))]

    def _paired(self, ctx: Context, slot: Slot, *, pairs: list[seq.RoundPair],
                prior: seq.Prior | None, design: seq.Design, runner: np.ndarray | None
                ) -> list[Check]:
        if not pairs:
            return []
        threshold = slot.threshold(ctx.thresholds)
        assert threshold is not None  # judged() kept only slots with a threshold
        spec = seq.CheckSpec(slot.name, threshold, slot.metric.direction, prior)
        result = seq.replay(spec, pairs, design, runner)
        # The figures shown beside the delta come from the same rounds as the delta and its
        # interval (the look that decided, or the last whole look).
        blocks = seq.whole_blocks(pairs, design.rounds_per_block)[:max(result.blocks, 1)]
        shown = [p for block in blocks for p in block] or pairs
        interval = result.block_range if result.gross else result.interval
        mean = _relative_check(
            slot, threshold, interval or seq.Interval(_delta(shown), -100.0, math.inf),
            result.outcome, base=_geomean([p.base for p in shown]),
            head=_geomean([p.head for p in shown]), head_n=len(shown), base_n=len(shown),
            decided_at_round=result.decided_at_round,
            interval_source=_ab_source(result, design),
            note=f"this run's rounds spread {result.scaled:.1f}x (in variance) as much as its "
            "calibration's: the calibration's spread was scaled up by as much"
            if result.scaled > SCALED_NOTE else "")
        spread_pct = ctx.thresholds.spread_pct
        spread = None if spread_pct is None else \
            seq.replay_spread(slot.name, spread_pct, pairs, design)
        if spread is None or spread.ratio is None:  # not judged, or no spread on either side
            return [mean]
        return [mean, _spread_check(slot, spread, shown)]


# A calibration scaled by more than this factor (in variance) is said in the check's note.
SCALED_NOTE = 1.5


def _delta(pairs: list[seq.RoundPair]) -> float:
    return math.expm1(float(np.mean([math.log(p.head / p.base) for p in pairs]))) * 100.0


def _spread_check(slot: Slot, spread: seq.SpreadResult, shown: list[seq.RoundPair]) -> Check:
    """The spread check of one check as a verdict row: the head's round-to-round sd over the
    base's, in percent above 1."""
    ratio = spread.ratio
    lo_pct = hi_pct = None
    if spread.interval is not None:
        lo, hi = ((end - 1.0) * 100.0 for end in spread.interval)
        if bounded_pct(lo, hi):  # few blocks: an F interval spans a factor of tens, says nothing
            lo_pct, hi_pct = lo, hi
    return Check(
        name=f"spread.{slot.name}", label=f"round-to-round spread of {slot.label}",
        kind="relative", direction=LOWER, unit="x sd", concurrency=slot.concurrency,
        arm=slot.arm, base=1.0, head=ratio,
        delta_pct=(ratio - 1.0) * 100.0 if ratio is not None else None,
        ci_low_pct=lo_pct, ci_high_pct=hi_pct,
        threshold=spread.threshold_pct, outcome=spread.outcome, head_n=len(shown),
        base_n=len(shown), decided_at_round=spread.decided_at_round,
        note=_unshown_spread_note(spread),
        interval_source=f"F test of the head's round-to-round spread against the base's "
        f"({spread.df} df each); fails when the head's is past "
        f"{1 + spread.threshold_pct / 100:g}x the base's; 90% interval of the ratio of sds")


def _unshown_spread_note(spread: seq.SpreadResult) -> str:
    """A spread check passes unless the F test shows the head past its threshold: with few
    rounds a ratio past it as measured is still a pass, which a reader must not take for
    "within the threshold"."""
    if spread.outcome != Outcome.PASS or spread.ratio is None or \
            not spread.ratio > 1.0 + spread.threshold_pct / 100.0:
        return ""
    return (f"past the threshold as measured, but not shown past it: {spread.df} df a side "
            "cannot tell this from noise at the spread check's share of the error budget")


def ab_design(head: Results, base: Results, family: int) -> tuple[seq.Design, CalibrationDesign]:
    """The sequential design `gate ab` fixed (its rounds per block and maximum, kept in the
    results), and the design its calibration was measured with. Results not measured by
    `gate ab` (two `gate run`s, each on its own server) are one block of all their rounds,
    judged at one look."""
    ab = head.plan.ab
    calibrated = CalibrationDesign(servers=ab.servers, rounds_per_block=ab.rounds_per_block,
                                   isolation=ab.isolation)
    per_round = ab.servers == "per_round"
    if head.sequential_rounds and head.sequential_rounds == base.sequential_rounds:
        block = ab.rounds_per_block
        blocks = min(max(head.sequential_rounds // block, 1), seq.LOOK_HORIZON)
        return seq.Design(block, blocks, family, per_round), calibrated
    rounds = max(len({c.repeat for c in head.cells}), 1)
    return seq.Design(rounds, 1, family), calibrated


def _ab_source(result: seq.CheckResult, design: seq.Design) -> str:
    prior = result.spec.prior
    if result.gross:
        return (f"{SCREENING_SOURCE} the range of the first block's {design.rounds_per_block} "
                f"rounds (one server pair), every one worse than the gross margin "
                f"{math.expm1(seq.gross_margin(result.spec.zone)):.0%}")
    stats = "" if result.t_fail is None or result.t_pass is None else (
        f"; t {result.t_fail:+.2f} against the threshold, {result.t_pass:+.2f} against 1.5x it, "
        f"{result.df:g} df")
    looks = (f"{result.rounds} paired round(s), {result.blocks} block(s) of "
             f"{design.rounds_per_block}{stats}")
    return f"{looks}; " + (prior.source if prior else "no calibration: the run's own spread only")


def _geomean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(values))))


# ---------------------------------------------------------------- baseline: unpaired


BASELINE_METHOD = (
    "Baseline: each check's interval is a Student t interval of mean log(head) - mean "
    "log(baseline) whose variance pools one measurement's spread ({noise}) with the repeats' "
    "own, at {conf:.1%} each ({confidence:.0%} simultaneous over {k} checks). fail: the whole "
    "interval is past the threshold in the bad direction; pass: its bad end is within it.")


@dataclass(frozen=True)
class BaselineReference:
    """A stored baseline's figures."""

    baseline: Baseline
    path: str | None = None
    mode = "baseline"

    def judge(self, ctx: Context) -> Judged:
        where = f" ({self.path})" if self.path else ""
        mismatch = [f"baseline{where} does not match the head run: {m}"
                    for m in mismatches(self.baseline, ctx.head)]
        if mismatch:
            return Judged(mismatch=mismatch, causes={Cause.NOT_COMPARABLE})
        found = judged(slots(ctx.head), ctx.thresholds)
        if self.baseline.provenance.kind == "reported":
            return self._shown(ctx, found)
        notes: list[str] = []
        made_by = self.baseline.provenance.gate_version
        if made_by and made_by != ctx.head.gate_version:
            # Another gate may measure a figure differently (a cell's window, a client fix):
            # said, not refused, since the plan hash already pins what is measured.
            notes.append(f"the baseline was measured by gate {made_by}, this run by gate "
                         f"{ctx.head.gate_version}")
        notes += [f"{s.label}: the baseline has no figure for {s.name}; not compared"
                  for s in found if s.name not in self.baseline.figures]
        found = [s for s in found if s.name in self.baseline.figures]
        bounds = ratio_slots(ctx.head, ctx.thresholds) \
            if ctx.thresholds.guided_free_tpot_ratio is not None else []
        family = max(len(found) + len(bounds), 1)
        conf = seq.bonferroni_confidence(ctx.thresholds.confidence, family)
        checks = [c for s in found if (c := self._unpaired(ctx, s, conf)) is not None]
        method = BASELINE_METHOD.format(noise=ctx.noise.description, conf=conf,
                                        confidence=ctx.thresholds.confidence, k=family)
        out = Judged(checks=checks, family=family, notes=notes, method=method)
        return out.add(bound_checks(ctx, family))

    def _shown(self, ctx: Context, found: list[Slot]) -> Judged:
        """A reported baseline is someone else's harness (prompts, schema, client): its figures
        are shown beside this run's, never judged; only the run's soundness and the absolute
        bounds decide. The first measured baseline of the plan replaces it."""
        source = self.baseline.provenance.url or self.baseline.provenance.source
        shown = []
        for s in found:
            figure = self.baseline.figures.get(s.name)
            if figure is None:
                continue
            values = list(per_repeat(ctx.head, s).values())
            reported = figure.point
            measured = float(np.mean(values)) if values else None
            shown.append(ReportedFigure(
                name=s.name, label=s.label, unit=figure.unit or s.metric.unit,
                reported=reported, measured=measured,
                delta_pct=(measured / reported - 1) * 100 if measured else None))
        note = (f"the baseline is reported ({source}), not measured by this plan: its figures "
                "are shown beside this run's and not judged; the first measured baseline of the "
                "plan (gate baseline update, the nightly workflow) replaces it")
        bounds = ratio_slots(ctx.head, ctx.thresholds) \
            if ctx.thresholds.guided_free_tpot_ratio is not None else []
        out = Judged(family=len(bounds), notes=[note], method="", reported=shown)
        return out.add(bound_checks(ctx, max(len(bounds), 1)))

    def _unpaired(self, ctx: Context, slot: Slot, confidence: float) -> Check | None:
        figure = self.baseline.figures[slot.name]
        values = list(per_repeat(ctx.head, slot).values())
        threshold = slot.threshold(ctx.thresholds)
        if not values or threshold is None:
            return None
        prior = single_prior(ctx.noise, slot.name, ctx.thresholds.run_noise_for(ctx.on_gpu))
        interval = seq.unpaired_interval(seq.log_sample(values), _baseline_sample(figure),
                                         prior_sigma=prior.sigma, prior_df=prior.df,
                                         confidence=confidence)
        return _relative_check(
            slot, threshold, interval, seq.decide(interval, threshold, slot.metric.direction),
            base=figure.point, head=float(np.mean(values)), head_n=len(values),
            base_n=figure.count, interval_source=f"head: {len(values)} repeat(s), baseline: "
            f"{figure.count} value(s); prior: {prior.source}")


def _baseline_sample(figure: Figure) -> seq.LogSample:
    if figure.values:
        return seq.log_sample(figure.values)
    assert figure.mean is not None  # a Figure holds values or a mean (its validator)
    return seq.log_sample_from_moments(figure.mean, figure.std, figure.n or 1)


# ---------------------------------------------------------------- alone: the absolute bound


@dataclass(frozen=True)
class NoReference:
    """The head alone."""

    mode = "absolute"

    def judge(self, ctx: Context) -> Judged:
        note = ("no baseline and no base results: only the guided/free ratio bound and "
                "validity were checked")
        bounds = ratio_slots(ctx.head, ctx.thresholds) \
            if ctx.thresholds.guided_free_tpot_ratio is not None else []
        return Judged(notes=[note]).add(bound_checks(ctx, max(len(bounds), 1)))


def bound_checks(ctx: Context, family: int) -> Judged:
    """The head's guided/free TPOT ratio per level against an absolute bound: the t interval
    of the mean log ratio over the repeats, its spread pooled with one server's spread of the
    ratio (calibration) or the labelled fallback."""
    bound = ctx.thresholds.guided_free_tpot_ratio
    if bound is None:
        return Judged(notes=["guided/free TPOT ratio bound disabled (guided_free_tpot_ratio "
                             "is null)"])
    conf = seq.bonferroni_confidence(ctx.thresholds.confidence, family)
    checks = []
    for slot in ratio_slots(ctx.head, ctx.thresholds):
        values = list(per_repeat(ctx.head, slot).values())
        if not values:
            continue
        prior = single_prior(ctx.noise, slot.name, ctx.thresholds.run_noise_for(ctx.on_gpu),
                             two_cells=True)
        _, lo, hi = seq.paired_interval([math.log(v) for v in values], prior.sigma, prior.df,
                                        conf)
        lo_x, hi_x = 1 + lo / 100, 1 + hi / 100
        outcome = Outcome.FAIL if lo_x > bound else Outcome.PASS if hi_x <= bound else \
            Outcome.INCONCLUSIVE
        checks.append(Check(
            name=f"bound.c{slot.concurrency}.tpot_p50", label=f"guided/free TPOT p50 "
            f"(c={slot.concurrency}) bound", kind="absolute", direction=LOWER, unit="x",
            concurrency=slot.concurrency, arm="guided", head=_geomean(values),
            ci_low=lo_x, ci_high=hi_x, threshold=bound, outcome=outcome, head_n=len(values),
            interval_source=f"{len(values)} repeat(s); prior: {prior.source}"))
    method = (f"The guided/free bound: a t interval of the mean log ratio over the repeats at "
              f"{conf:.1%} each ({ctx.noise.description}).")
    return Judged(checks=checks, family=family, method=method)


# ---------------------------------------------------------------- the verdict


Reference = ABReference | BaselineReference | NoReference


def compare_results(head: Results, reference: Reference, thresholds: Thresholds, *,
                    noise: Noise | None = None, head_path: str | None = None) -> Verdict:
    """The verdict on `head` against `reference` (A/B base results, a stored baseline, or
    none: only the absolute checks)."""
    ctx = Context(head, thresholds, noise or Noise())
    judged_ = _validity(head, thresholds, "head").add(reference.judge(ctx))
    base = reference.base if isinstance(reference, ABReference) else None
    runner_errors, warnings = _runner_notes(head, base)
    warnings += [w for who, res in (("head", head), ("base", base)) if res is not None
                 for w in shape_warnings(res, thresholds, who)]
    warnings += machine_warnings([res for res in (head, base) if res is not None])
    if base is not None:
        warnings += drift_warnings(base, base.plan.ab.rounds_per_block)
    if runner_errors:
        judged_.causes.add(Cause.RUNNER)
    # what broke a side first, then what followed from it (gate.judge.first_cause)
    errors = judged_.mismatch + first_cause.causes_first(judged_.errors) + runner_errors
    checks = mark_improvements(judged_.checks)
    outcome = Outcome.ERROR if errors else worst([c.outcome for c in checks + judged_.validity])
    verdict = Verdict(
        outcome=outcome, headline="", mode=reference.mode, head_results=head_path,
        base_results=reference.path if isinstance(reference, ABReference)
        else None,
        baseline=reference.path if isinstance(reference, BaselineReference) else None,
        checks=checks + judged_.validity, errors=errors, notes=judged_.notes,
        warnings=warnings, thresholds=thresholds.model_dump(mode="json"),
        noise_profile=ctx.noise.description, method=judged_.method, rounds=judged_.rounds,
        reported=judged_.reported)
    verdict.headline = headline(verdict)
    verdict.advice = advice(outcome, judged_.causes, bool(ctx.noise.calibrations),
                            ttft_cause(checks))
    return verdict


def _runner_notes(head: Results, base: Results | None) -> tuple[list[str], list[str]]:
    """(errors, warnings) about the runners: the fingerprints' warnings and the doctor's."""
    errors, warnings = [], warnings_for(head.fingerprint)
    if base is not None:
        warnings += [f"base: {w}" for w in warnings_for(base.fingerprint)]
    for who, res in (("head", head), ("base", base)):
        if res is not None:
            for found_errors, found_warnings in (runner_findings(res, who),
                                                 runner_notes(res, who)):
                errors += found_errors
                warnings += found_warnings
    return errors, warnings


def _describe(c: Check) -> str:
    if c.kind == "relative":
        if c.ci_low_pct is None or c.ci_high_pct is None:
            return (f"{c.label} {c.delta_pct:+.1f}% (no interval yet: too few blocks of its "
                    f"own spread, threshold {c.threshold:g}%)")
        kind = "range of its rounds" if c.interval_is_range else "interval"
        return (f"{c.label} {c.delta_pct:+.1f}% ({kind} {c.ci_low_pct:+.1f}% to "
                f"{c.ci_high_pct:+.1f}%, threshold {c.threshold:g}%)")
    if c.kind == "absolute":
        return (f"{c.label} {c.head:.2f}x (interval {c.ci_low:.2f} to {c.ci_high:.2f}, "
                f"bound {c.threshold:g})")
    return f"{c.label} {c.head:g} (threshold {c.threshold:g})"


def headline(v: Verdict) -> str:
    if v.outcome == Outcome.ERROR:
        more = f" (+{len(v.errors) - 1} more)" if len(v.errors) > 1 else ""
        if died := first_cause.cause_line(v.errors):
            return f"ERROR: {died}{more}"
        first = first_cause.condensed(v.errors[0]) if v.errors else "a check could not be judged"
        return f"ERROR: the measurement cannot be judged: {first}{more}"
    better = improvements(v.checks)
    bad = [c for c in v.checks if c.outcome == v.outcome and not c.improved]
    bad = ttft_first(bad) if ttft_cause(v.checks) == "ttft" else bad
    more = f"; {len(bad) - 1} more" if len(bad) > 1 else ""
    if v.outcome == Outcome.FAIL:
        what = "time to first token: " if is_ttft(bad[0]) else ""
        return f"FAIL: {what}{_describe(bad[0])}{more}{_improved_clause(better)}"
    if v.outcome == Outcome.INCONCLUSIVE:
        return f"INCONCLUSIVE: {_describe(bad[0])} is not decided{more}{_improved_clause(better)}"
    if v.reported:
        shown = v.reported[0]
        beside = (f"{shown.label} {shown.measured:.4g} measured, {shown.reported:.4g} reported "
                  f"({shown.delta_pct:+.1f}%)" if shown.measured is not None and
                  shown.delta_pct is not None else f"{shown.label} not measured")
        return (f"PASS: the run is sound ({len(v.checks)} checks); beside the reported "
                f"baseline, not judged: {beside}")
    if not v.checks:
        return "PASS: nothing to judge"
    if better:
        others = len(v.checks) - len(better)
        rest = f"; {len(better) - 1} more improved" if len(better) > 1 else ""
        return (f"PASS: improved: {_describe(better[0])}{rest}; {others} other checks within "
                "thresholds")
    lead = next((c for c in v.checks if c.kind != "validity"), v.checks[0])
    return f"PASS: {len(v.checks)} checks within thresholds; {_describe(lead)}"


def _improved_clause(better: list[Check]) -> str:
    if not better:
        return ""
    rest = f" (+{len(better) - 1} more)" if len(better) > 1 else ""
    return f"; improved: {_describe(better[0])}{rest}"


def is_ttft(c: Check) -> bool:
    return "ttft" in c.name


def ttft_first(checks: list[Check]) -> list[Check]:
    """Time-to-first-token checks first (stable order otherwise)."""
    return sorted(checks, key=lambda c: not is_ttft(c))


def slowdown_log(c: Check) -> float:
    """How much worse the head is, as a log ratio whatever the direction: a throughput halved
    and a latency doubled are both ln 2."""
    if c.delta_pct is None or c.delta_pct <= -100:
        return 0.0
    change = math.log1p(c.delta_pct / 100)
    return -change if c.direction == "higher_is_better" else change


# A TTFT failure is the signal when its log slowdown is at least this multiple of the worst
# failing per-step check's: a grammar that compiles 10x slower moves TTFT by far more than
# anything per token, while a slower engine step (the seed regression) moves the first token
# by about as much as every later one, because the first token is a step too.
TTFT_LEADS_FACTOR = 2.0


def ttft_cause(checks: list[Check]) -> Literal["ttft", "steps", None]:
    """Whether failing time-to-first-token checks point at the first token itself ("ttft":
    grammar compilation, the grammar cache, queueing), or moved with a slower engine step
    ("steps"); None when no TTFT check failed."""
    failing = [c for c in checks if c.outcome == Outcome.FAIL and c.kind == "relative"]
    ttft = [slowdown_log(c) for c in failing if is_ttft(c)]
    if not ttft:
        return None
    steps = [slowdown_log(c) for c in failing if not is_ttft(c)]
    return "ttft" if not steps or max(ttft) >= TTFT_LEADS_FACTOR * max(steps) else "steps"


def advice(outcome: Outcome, causes: set[Cause], calibrated: bool,
           ttft: Literal["ttft", "steps", None] = None) -> list[str]:
    """What to do next, chosen by the outcome, the typed causes of its errors and what a
    failing time-to-first-token check points at (`ttft_cause`)."""
    out = []
    if outcome == Outcome.INCONCLUSIVE:
        out.append(
            "Not decided within the design's rounds: continue the same test with gate ab "
            "--resume OUT (it adds rounds to this sequential test; a fresh run would start a "
            "new one)" + ("" if calibrated else ", and calibrate this runner (gate calibrate) "
                          "so that each round carries more weight") + ".")
    if outcome == Outcome.FAIL:
        out.append("A slowdown beyond the threshold: see the failing checks.")
    if ttft == "ttft":
        out.append(
            "Guided requests wait longer for their first token: look at grammar compilation "
            "and the grammar cache (vllm/v1/structured_output/, the backend's compiler); "
            "'Where the wait is' says whether the time is spent waiting for the grammar.")
    elif ttft == "steps":
        out.append(
            "Time to first token moved with the per-step cost (the first token is an engine "
            "step too): look at what every guided step does (the bitmask path, "
            "vllm/v1/structured_output/utils.py and the model runner) before the compiler.")
    if Cause.OFF_SCHEMA in causes:
        out.append(
            "Outputs did not follow the schema: check that the request field is still honoured "
            "(response_format json_schema or structured_outputs) and that the backend is set.")
    if Cause.NOT_COMPARABLE in causes:
        out.append("The two sides are not comparable: measure both with the same plan on the "
                   "same runner class.")
    return out
