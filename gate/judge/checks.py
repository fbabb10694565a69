"""What `gate compare` judges: the figures of a results.json, one per check.

A check is a metric at a concurrency level, read from the guided cells of every repeat:

- drain req/min (higher is better; drain output tok/s is the same measurement, read per
  token: kept in the results, judged once);
- per guided sweep level: TPOT p50, TPOT p99, ITL p99 (lower is better);
- per sweep level from `ratio_min_concurrency` up: the structured-output overhead, guided
  TPOT p50 over free TPOT p50 in the same repeat (computed once, in metrics.level_ratios);
- per sweep level and guided arm (guided: the workload's schemas, the grammar cache hits;
  unique: a new schema per request, the cache misses): TTFT p50 and TTFT p90 (lower is
  better), and the wait a schema adds before the first token, guided TTFT p50 over free TTFT
  p50 in the same repeat (docs/compare.md#time-to-first-token-and-grammar-compilation).

Pure functions: results in, figures per repeat out. How they are judged is gate.judge.compare.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from gate.measure.results import CellSummary, Results
from gate.plan.spec import Plan
from gate.plan.thresholds import Thresholds

Direction = Literal["higher_is_better", "lower_is_better"]
HIGHER: Direction = "higher_is_better"
LOWER: Direction = "lower_is_better"


@dataclass(frozen=True, kw_only=True)
class Metric:
    key: str
    label: str
    unit: str
    direction: Direction
    threshold_field: str
    phase: str
    get: Callable[[CellSummary], float | None]
    # False: the same measurement as another judged metric, read another way (drain output
    # tok/s is drain req/min times tokens per request): judged once, by the other
    judged: bool = True
    arm: str = "guided"  # the arm whose cells it reads
    ratio_field: str = "tpot_p50_ratio"  # phase "ratio": the LevelRatio field it reads


def _dist(attr: str, stat: str) -> Callable[[CellSummary], float | None]:
    def get(cell: CellSummary) -> float | None:
        dist = getattr(cell, attr)
        return getattr(dist, stat) if dist is not None and dist.count > 0 else None

    return get


DRAIN_METRICS = (
    Metric(key="req_per_min", label="drain req/min", unit="req/min", direction=HIGHER,
           threshold_field="drain_throughput_pct", phase="drain",
           get=lambda c: c.requests_per_min),
    Metric(key="output_tok_s", label="drain output tok/s", unit="tok/s", direction=HIGHER,
           threshold_field="drain_throughput_pct", phase="drain",
           get=lambda c: c.output_throughput, judged=False),
)
SWEEP_METRICS = (
    Metric(key="tpot_p50_ms", label="TPOT p50", unit="ms", direction=LOWER,
           threshold_field="tpot_p50_pct", phase="sweep", get=_dist("tpot_ms", "p50")),
    Metric(key="tpot_p99_ms", label="TPOT p99", unit="ms", direction=LOWER,
           threshold_field="tpot_p99_pct", phase="sweep", get=_dist("tpot_ms", "p99")),
    Metric(key="itl_p99_ms", label="ITL p99", unit="ms", direction=LOWER,
           threshold_field="itl_p99_pct", phase="sweep", get=_dist("itl_ms", "p99")),
)
OVERHEAD = Metric(key="tpot_p50", label="guided/free TPOT p50", unit="x", direction=LOWER,
                  threshold_field="overhead_pct", phase="ratio", get=lambda c: None)
TTFT_METRICS = tuple(
    Metric(key=key, label=label, unit="ms", direction=LOWER, threshold_field=field,
           phase="sweep", get=_dist("ttft_ms", stat), arm=arm)
    for arm in ("guided", "unique")
    for key, label, field, stat in (("ttft_p50_ms", "TTFT p50", "ttft_p50_pct", "p50"),
                                    ("ttft_p90_ms", "TTFT p90", "ttft_tail_pct", "p90"))
)
TTFT_WAIT = (
    Metric(key="ttft_p50", label="guided/free TTFT p50", unit="x", direction=LOWER,
           threshold_field="ttft_wait_pct", phase="ratio", get=lambda c: None,
           ratio_field="ttft_p50_ratio"),
    Metric(key="unique_ttft_p50", label="unique-schema/free TTFT p50", unit="x",
           direction=LOWER, threshold_field="ttft_wait_pct", phase="ratio", get=lambda c: None,
           arm="unique", ratio_field="unique_ttft_p50_ratio"),
)
ARM_WORDS = {"guided": "guided", "unique": "unique schemas"}
WAIT_FIELDS = {m.ratio_field for m in TTFT_WAIT}


@dataclass(frozen=True)
class Slot:
    """One figure to judge: a metric at a concurrency level (the drain's own level)."""

    metric: Metric
    concurrency: int

    @property
    def arm(self) -> str:
        return self.metric.arm

    @property
    def name(self) -> str:
        if self.metric.phase == "drain":
            return f"drain.{self.metric.key}"
        if self.metric.phase == "ratio":
            return f"ratio.c{self.concurrency}.{self.metric.key}"
        # unique-schema cells are their own family of names (the guided ones keep theirs)
        prefix = "sweep" if self.metric.arm == "guided" else self.metric.arm
        return f"{prefix}.c{self.concurrency}.{self.metric.key}"

    @property
    def label(self) -> str:
        if self.metric.phase == "drain":
            return f"{self.metric.label} (guided)"
        if self.metric.phase == "ratio":
            return f"{self.metric.label} (c={self.concurrency})"
        return f"{self.metric.label} ({ARM_WORDS[self.metric.arm]}, c={self.concurrency})"

    def threshold(self, thresholds: Thresholds) -> float | None:
        return getattr(thresholds, self.metric.threshold_field)


def slots(results: Results) -> list[Slot]:
    """Every relative figure the results can provide: the drain, each guided sweep level, and
    the time to first token of each guided arm's levels with the wait it adds over free."""
    index = results.index()
    out = []
    for level in index.levels("drain", "guided")[:1]:
        out += [Slot(m, level) for m in DRAIN_METRICS]
    for level in index.levels("sweep", "guided"):
        out += [Slot(m, level) for m in SWEEP_METRICS]
    return out + ttft_slots(results)


def ttft_slots(results: Results) -> list[Slot]:
    """TTFT p50 and p90 per guided arm and level, then guided/free TTFT p50 per level where
    both arms were measured."""
    index = results.index()
    out = [Slot(m, level) for m in TTFT_METRICS for level in index.levels("sweep", m.arm)]
    for metric in TTFT_WAIT:
        levels = sorted({r.concurrency for r in results.ratios
                         if getattr(r, metric.ratio_field)})
        out += [Slot(metric, level) for level in levels]
    return out


def ratio_slots(results: Results, thresholds: Thresholds) -> list[Slot]:
    """The guided/free overhead per level, from `ratio_min_concurrency` up, where both arms
    were measured."""
    levels = sorted({r.concurrency for r in results.ratios if r.tpot_p50_ratio})
    return [Slot(OVERHEAD, lv) for lv in levels if lv >= thresholds.ratio_min_concurrency]


def planned_slots(plan: Plan, thresholds: Thresholds) -> list[Slot]:
    """The slots an A/B of `plan` will judge, known before measuring (gate ab sizes its
    sequential test by them): as `slots` and `ratio_slots` would find them in its results."""
    out = []
    if plan.drain.enabled:
        out += [Slot(m, plan.drain.concurrency) for m in DRAIN_METRICS]
    arms = set(plan.sweep.arms) if plan.sweep.enabled else set()
    levels = sorted(set(plan.sweep.levels))
    if "guided" in arms:
        out += [Slot(m, lv) for lv in levels for m in SWEEP_METRICS]
    out += [Slot(m, lv) for m in TTFT_METRICS if m.arm in arms for lv in levels]
    if "free" in arms:
        out += [Slot(m, lv) for m in TTFT_WAIT if m.arm in arms for lv in levels]
    if {"guided", "free"} <= arms:
        out += [Slot(OVERHEAD, lv) for lv in levels if lv >= thresholds.ratio_min_concurrency]
    return judged(out, thresholds)


def cells_read(plan: Plan, thresholds: Thresholds) -> set[tuple[str, str, int]]:
    """The cells (phase, arm, concurrency) the judged checks of an A/B of `plan` read: a
    ratio reads its level's cell of each of its two arms."""
    read = set()
    for slot in planned_slots(plan, thresholds):
        metric, level = slot.metric, slot.concurrency
        if metric.phase == "ratio":
            read |= {("sweep", metric.arm, level), ("sweep", "free", level)}
        else:
            read.add((metric.phase, metric.arm, level))
    return read


def judged(found: list[Slot], thresholds: Thresholds) -> list[Slot]:
    """The slots whose threshold is set (a null threshold switches a check off), one per
    measurement, and the wait a schema adds from `ttft_wait_min_concurrency` up."""
    return [s for s in found if s.metric.judged and s.threshold(thresholds) is not None
            and not (s.metric.ratio_field in WAIT_FIELDS and s.metric.phase == "ratio"
                     and s.concurrency < thresholds.ttft_wait_min_concurrency)]


def per_repeat(results: Results, slot: Slot) -> dict[int, float]:
    """The slot's figure per repeat (only positive, finite figures: a cell with no completed
    request or no latency has none)."""
    if slot.metric.phase == "ratio":
        values = {r.repeat: getattr(r, slot.metric.ratio_field) for r in results.ratios
                  if r.concurrency == slot.concurrency}
    else:
        cells = results.cells_of(slot.metric.phase, slot.metric.arm, slot.concurrency)
        values = {c.repeat: slot.metric.get(c) for c in cells if c.completed > 0}
    return {rep: float(v) for rep, v in sorted(values.items()) if v is not None and v > 0}


def results_figures(results: Results) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Per-repeat values of every relative figure, and their units (for `gate baseline update`)."""
    figures, units = {}, {}
    for slot in slots(results):
        values = list(per_repeat(results, slot).values())
        if values:
            figures[slot.name] = values
            units[slot.name] = slot.metric.unit
    return figures, units
