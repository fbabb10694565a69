"""What the report shows, as plain data for the template (gate/report/templates/comment.md.j2).

Strings that come from files a PR's code could have written (headline, labels, errors, units,
paths, hunk text, fingerprint fields) stay plain `str`: the template escapes every plain value
through gate.report.escape. Figures the gate formats itself from numbers (values, intervals,
emoji, the mermaid chart) are `Markup`, which the template prints as they are. Nothing here
escapes or lays out markdown; all functions are pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median

from markupsafe import Markup

from gate.core.text import one_line
from gate.evidence.attribution import Evidence, apply_evidence
from gate.evidence.hunks import Hunk, HunkSet
from gate.evidence.wait import WaitRow, wait_rows
from gate.judge.looks import Trajectory
from gate.judge.verdict import Check, Outcome, ReportedFigure, Verdict
from gate.measure.output_shape import guided_output_shape
from gate.measure.results import Results
from gate.profile.diff_file import ProfileDiff
from gate.report.chart import mermaid_chart
from gate.report.pictures import interval_bar, mermaid_looks, sparkline
from gate.report.where_time import render_where_time
from gate.runner.fingerprint import Fingerprint, runner_line, warnings_for

DASH = Markup("–")
MAX_LIST_ITEMS = 20
AGAINST = {
    "ab": "base build vs head build, same runner",
    "baseline": "stored baseline",
    "absolute": "absolute bounds only",
}


# ---- numbers (trusted: formatted from floats) ------------------------------------------------


def fmt_num(x: float | None) -> Markup:
    if x is None:
        return DASH
    if abs(x) >= 1000:
        return Markup(f"{x:,.0f}")
    if abs(x) >= 100:
        return Markup(f"{x:.1f}")
    return Markup(f"{x:.3g}" if abs(x) >= 0.01 or x == 0 else f"{x:.2e}")


@dataclass(frozen=True)
class Value:
    """A figure and its unit; the unit comes from verdict.json, so it is escaped."""

    number: Markup
    unit: str = ""


def fmt_value(x: float | None, unit: str) -> Value:
    if x is None:
        return Value(DASH)
    if unit == "share":
        return Value(Markup(f"{x:.1%}"))
    if unit == "x":
        return Value(Markup(f"{fmt_num(x)}×"))
    return Value(fmt_num(x), one_line(unit, 20))


def fmt_pct(x: float | None) -> Markup:
    return DASH if x is None else Markup(f"{x:+.1f}%")


def fmt_interval(c: Check) -> Markup:
    if c.ci_low_pct is not None and c.ci_high_pct is not None:
        kind = "range " if c.interval_is_range else ""  # screened: the rounds' range
        return Markup(f"{kind}[{c.ci_low_pct:+.1f}%, {c.ci_high_pct:+.1f}%]")
    if c.ci_low is not None and c.ci_high is not None:  # absolute checks: the ratio's interval
        return Markup(f"[{fmt_num(c.ci_low)}, {fmt_num(c.ci_high)}]")
    return DASH


def fmt_threshold(c: Check) -> Markup:
    lower = c.direction == "lower_is_better"
    if c.kind == "relative":
        return Markup(f"≤ +{c.threshold:g}%" if lower else f"≥ −{c.threshold:g}%")
    if c.unit in ("share", "x"):
        bound = fmt_value(c.threshold, c.unit).number
    else:
        bound = Markup(f"{c.threshold:g}")
    return Markup(f"≤ {bound}" if lower else f"≥ {bound}")


def med(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return median(present) if present else None


# ---- checks ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class CheckRow:
    label: str
    base: Value
    head: Value
    delta: Markup
    interval: Markup
    threshold: Markup
    outcome: Outcome
    note: str
    improved: bool = False  # a decided improvement past the threshold (gate.judge.improvement)
    bar: Markup = Markup("–")  # the interval against the threshold (gate.report.pictures)
    trend: Markup = Markup("")  # the check's history on the default branch, as a sparkline
    acknowledged: str = ""  # who acknowledged this slowdown, and why


def check_row(c: Check, history: dict[str, list[float]] | None = None) -> CheckRow:
    ack = c.acknowledged
    trend = sparkline((history or {}).get(c.name, []))
    return CheckRow(label=one_line(c.label or c.name, 120), base=fmt_value(c.base, c.unit),
                    head=fmt_value(c.head, c.unit), delta=fmt_pct(c.delta_pct),
                    interval=fmt_interval(c), threshold=fmt_threshold(c), outcome=c.outcome,
                    note=one_line(c.note, 160), improved=c.improved, bar=interval_bar(c),
                    trend=trend,
                    acknowledged=one_line(f"{ack.login}: {ack.reason}", 200) if ack else "")


# What else an upgrade's builds differ in, named beside vLLM's own versions.
UPGRADE_PACKAGES = ("torch", "xgrammar", "llguidance", "outlines_core", "transformers")


def upgrade_line(head: Results | None, base: Results | None) -> str:
    """'vLLM 0.31.0 -> 0.32.0 (xgrammar 0.2.7 -> 0.2.8)' when the two builds are different
    vLLM versions (an upgrade); empty otherwise."""
    if head is None or base is None:
        return ""
    old, new = base.fingerprint, head.fingerprint
    if not old.vllm_version or not new.vllm_version or old.vllm_version == new.vllm_version:
        return ""
    others = [f"{name} {old.versions[name]} -> {new.versions[name]}" for name in UPGRADE_PACKAGES
              if old.versions.get(name) and new.versions.get(name)
              and old.versions[name] != new.versions[name]]
    return f"vLLM {old.vllm_version} -> {new.vllm_version}" + (
        f" ({', '.join(others)})" if others else "")


@dataclass(frozen=True)
class LooksView:
    """One check's sequential test, look by look: why it stopped, and (for checks that did
    not pass at once) its chart."""

    label: str
    why: str
    chart: Markup


MAX_LOOK_CHARTS = 3


def looks_views(found: list[Trajectory] | None) -> list[LooksView]:
    out, charts = [], 0
    for t in found or []:
        chart = Markup("")
        if len(t.looks) > 1 and charts < MAX_LOOK_CHARTS and t.looks[-1].outcome != Outcome.PASS:
            chart = mermaid_looks([look.delta_pct for look in t.looks],
                                  [look.round for look in t.looks], threshold=t.threshold_pct,
                                  title="change per look: fails past the grey line")
            charts += 1
        out.append(LooksView(one_line(t.label, 120), one_line(t.why, 300), chart))
    return out


# ---- guided vs free, drain -------------------------------------------------------------------


def builds(head: Results, base: Results | None) -> list[tuple[str, Results]]:
    return [("base", base), ("head", head)] if base is not None else [("head", head)]


def build_name(name: str, r: Results) -> str:
    """'base (V1)': the build and the model runner its tables come from."""
    runner = r.fingerprint.model_runner
    return f"{name} ({runner.upper()})" if runner else name


def runners_line(head: Results | None, base: Results | None) -> str:
    """Which model runner served the tables below, and how that is known."""
    if head is None:
        return ""
    pairs = builds(head, base)
    lines = {name: runner_line(r.fingerprint) for name, r in pairs}
    if len(set(lines.values())) == 1:
        both = " (both builds)" if base is not None else ""
        return f"Tables from the {lines['head']}{both}"
    return "Tables from: " + "; ".join(f"{name}: {line}" for name, line in lines.items())


def fmt_ratio(ratio: float | None, r: Results, c: int) -> Markup:
    if ratio is None:
        return DASH
    t = r.plan.thresholds
    bound = t.guided_free_tpot_ratio
    over = bound is not None and c >= t.ratio_min_concurrency and ratio > bound
    return Markup(f"**{ratio:.2f}×** ⚠️" if over else f"{ratio:.2f}×")


def level_row(name: str, r: Results, c: int) -> list[Markup]:
    g, f = r.cells_of("sweep", "guided", c), r.cells_of("sweep", "free", c)
    ratio = med([x.tpot_p50_ratio for x in r.ratios if x.concurrency == c])
    return [Markup(str(c)), Markup(build_name(name, r)),
            fmt_num(med([x.tpot_ms.p50 if x.tpot_ms else None for x in g])),
            fmt_num(med([x.tpot_ms.p50 if x.tpot_ms else None for x in f])),
            fmt_ratio(ratio, r, c), fmt_num(med([x.output_throughput for x in g])),
            fmt_num(med([x.output_throughput for x in f]))]


def guided_free_rows(head: Results, base: Results | None) -> list[list[Markup]]:
    pairs = builds(head, base)
    levels = sorted({c.concurrency for _, r in pairs for c in r.cells_of("sweep")})
    return [level_row(name, r, c) for c in levels for name, r in pairs]


# ---- time to first token, and where the wait is ----------------------------------------------


def ttft_p50(r: Results, arm: str, c: int) -> float | None:
    return med([x.ttft_ms.p50 if x.ttft_ms else None for x in r.cells_of("sweep", arm, c)])


def fmt_ms(x: float | None) -> Markup:
    return DASH if x is None else Markup(f"{x:.0f}")


def minus(a: float | None, b: float | None) -> Markup:
    return DASH if a is None or b is None else Markup(f"{a - b:+.0f}")


def ttft_row(name: str, r: Results, c: int) -> list[Markup]:
    guided, unique, free = (ttft_p50(r, arm, c) for arm in ("guided", "unique", "free"))
    return [Markup(str(c)), Markup(name), fmt_ms(guided), fmt_ms(unique), fmt_ms(free),
            minus(guided, free), minus(unique, free)]


def ttft_rows(head: Results, base: Results | None) -> list[list[Markup]]:
    """TTFT p50 per level and build: shared schemas (cache hit), unique (miss), free."""
    pairs = builds(head, base)
    levels = sorted({c.concurrency for _, r in pairs for c in r.cells_of("sweep")})
    return [ttft_row(name, r, c) for c in levels for name, r in pairs]


def wait_row(row: WaitRow) -> list[Markup | str]:
    def pair(get) -> Markup:
        h = get(row.head)
        b = get(row.base) if row.base is not None else None
        return Markup(f"{fmt_ms(b)} → {fmt_ms(h)}") if row.base is not None else fmt_ms(h)

    return [row.label, pair(lambda w: w.ttft_ms), pair(lambda w: w.queue_ms),
            pair(lambda w: w.grammar_wait_ms), pair(lambda w: w.prefill_ms),
            one_line(row.cause, 300) or "–"]


def validity(r: Results) -> Markup:
    guided = [c for c in r.cells if c.arm != "free"]
    valid = sum(c.valid_outputs for c in guided)
    total = valid + sum(c.invalid_outputs for c in guided)
    lengths = sum(c.length_finishes for c in guided)
    if not total:
        return DASH
    return Markup(f"{valid}/{total}" + (f", {lengths} cut by length" if lengths else ""))


def drain_rows(head: Results, base: Results | None) -> list[list[Markup]]:
    rows = []
    for name, r in builds(head, base):
        if cells := r.cells_of("drain"):
            done = f"{sum(c.completed for c in cells)}/{sum(c.requests for c in cells)}"
            rows.append([Markup(build_name(name, r)), Markup(done), fmt_num(med([c.duration_s for c in cells])),
                         fmt_num(med([c.requests_per_min for c in cells])),
                         fmt_num(med([c.output_throughput for c in cells])), validity(r)])
    return rows


# ---- environment, problems, run info ---------------------------------------------------------


def capped(items: list[str], limit: int = 600) -> list[str]:
    """Unique, one line each, at most MAX_LIST_ITEMS (then a count of the rest)."""
    items = list(dict.fromkeys(one_line(i, limit) for i in items if i))
    if len(items) > MAX_LIST_ITEMS:
        items = items[:MAX_LIST_ITEMS] + [f"… and {len(items) - MAX_LIST_ITEMS} more"]
    return items


def environment_warnings(v: Verdict, head: Results | None, base: Results | None) -> list[str]:
    """The verdict's warnings (the fingerprints' and the runner doctor's, from compare),
    or the head's fingerprint warnings when the verdict carries none."""
    out = list(v.warnings)
    if not out and head is not None:
        out = warnings_for(head.fingerprint)
    if base is not None and head is not None:
        hb, hh = base.fingerprint.hardware_key, head.fingerprint.hardware_key
        if hb != hh:
            out.append(f"base ran on {hb} but head on {hh}: A/B figures are not comparable")
    return capped(out)


def run_errors(v: Verdict, head: Results | None, base: Results | None) -> list[str]:
    errors = list(v.errors)
    errors += [f"head run: {e}" for e in head.errors] if head is not None else []
    errors += [f"base run: {e}" for e in base.errors] if base is not None else []
    return capped(errors)


def version_line(fp: Fingerprint) -> str:
    version = fp.vllm_version or "unknown"
    return version + (f" ({fp.vllm_commit})" if fp.vllm_commit else "")


def threads_info(fp: Fingerprint) -> str:
    quota = fp.cpu_quota.quota_cpus
    return (f"{fp.torch_threads if fp.torch_threads is not None else '?'} torch threads; "
            f"{fp.host_cores} host cores; quota {f'{quota:g}' if quota else 'none'}; "
            f"OMP_NUM_THREADS={fp.omp_num_threads or 'unset'}")


def output_length(r: Results) -> str:
    """Mean guided output length as measured, against the plan's expectation."""
    shape = guided_output_shape(r.records)
    if shape is None:
        return DASH
    expected = r.plan.workload.expected.output_tokens
    return (f"{shape.mean_tokens:.0f} tokens ({shape.mean_chars:.0f} characters) per guided "
            f"output, {shape.requests} requests" + (f"; plan expects {expected}" if expected else ""))


def timings(r: Results) -> str:
    if not r.timings_s:
        return DASH
    return ", ".join(f"{k.removesuffix('_s')} {v:.0f} s" for k, v in r.timings_s.items())


def streams(r: Results) -> str:
    """Stream integrity per run: the share of coalesced requests in the measured cells, and
    the cells measured again because their streams arrived held back."""
    cells = [c for c in r.cells if c.phase in ("drain", "sweep")]
    total = sum(c.completed for c in cells)
    held = sum(c.coalesced_requests for c in cells)
    share = f"{held} of {total} requests coalesced ({held / total:.1%})" if total else DASH
    again = [f"{c.key.label} ×{c.remeasured + 1} ({c.discarded_coalesced} discarded)"
             for c in cells if c.remeasured]
    return share + ("; measured again: " + ", ".join(again) if again else "")


RUN_INFO_LABELS = ("Plan", "Plan hash", "Hardware", "vLLM", "Model runner", "Threads",
                   "Output length", "Repeats", "Status", "Streams", "Time", "Created")


def run_info_column(r: Results) -> list[str]:
    fp = r.fingerprint
    values = [r.plan.name, r.plan_hash, fp.hardware_key, version_line(fp), runner_line(fp),
              threads_info(fp), output_length(r), str(r.plan.repeats), r.status, streams(r),
              timings(r), r.created_at]
    return [one_line(x, 200) for x in values]


def cost_line(v: Verdict) -> str:
    """How the verdict was reached: rounds, runner time, the noise profile (A/B)."""
    parts = []
    if v.rounds is not None:
        decided = [c.decided_at_round for c in v.checks if c.decided_at_round]
        parts.append(f"{v.rounds} round(s) per build" + (
            f", every check decided by round {max(decided)}" if decided and len(decided) ==
            sum(1 for c in v.checks if c.kind == "relative") else ""))
    if v.runner_seconds:
        rs = v.runner_seconds
        shown = [f"{k} {rs[k]:.0f} s" for k in ("startup", "warmup", "drain", "sweep") if k in rs]
        parts.append(f"runner time {rs.get('wall', sum(rs.values())):.0f} s"
                     + (f" ({', '.join(shown)})" if shown else ""))
    if v.noise_profile:
        parts.append(f"noise: {v.noise_profile}")
    return one_line(" · ".join(parts), 600)


@dataclass(frozen=True)
class RunInfo:
    builds: list[str]
    rows: list[tuple[str, list[str]]]


def run_info(head: Results, base: Results | None) -> RunInfo:
    pairs = builds(head, base)
    columns = [run_info_column(r) for _, r in pairs]
    rows = [(label, [col[i] for col in columns]) for i, label in enumerate(RUN_INFO_LABELS)]
    return RunInfo([name for name, _ in pairs], rows)


# ---- hunks -----------------------------------------------------------------------------------

EMPTY_HUNK = {"binary": "binary file: no text diff", "renamed": "renamed without changes",
              "added": "empty file added", "deleted": "empty file deleted"}


def line_range(start: int, count: int) -> str:
    return f"L{start}" if count == 1 else f"L{start}–{start + count - 1}"


def hunk_where(h: Hunk) -> Markup:
    if h.new_lines:
        return Markup(" " + line_range(h.new_start, h.new_lines))
    if h.old_lines:
        return Markup(" old " + line_range(h.old_start, h.old_lines))
    return Markup("")


@dataclass(frozen=True)
class HunkView:
    """One hunk as shown: `text` is the (maybe shortened) body, `cut` the lines left out."""

    path: str
    where: Markup
    change: str
    old_path: str | None
    section: str
    mechanisms: str
    score: Markup
    text: str | None
    empty_note: Markup
    cut: int
    open: bool
    evidence: str | None = None  # measured added time of the function it changes


@dataclass(frozen=True, kw_only=True)
class HunksView:
    merge_base: str
    total: int
    files: int
    files_watched: int
    files_changed: int
    ranked: int
    blocks: list[Markup] = field(default_factory=list)  # rendered hunks, best ranked first
    truncated: int = 0  # shown hunks whose body was shortened
    between: str | None = None  # two installed builds' packages, not a PR's commits

    @property
    def left_out(self) -> int:
        return self.total - len(self.blocks)


def hunks_view(hs: HunkSet) -> HunksView:
    return HunksView(merge_base=hs.merge_base[:12], total=len(hs.hunks),
                     files=len({h.path for h in hs.hunks}), files_watched=hs.files_watched,
                     files_changed=hs.files_changed,
                     ranked=sum(1 for h in hs.hunks if h.mechanisms), between=hs.between)


def hunk_view(h: Hunk, body: str | None, cut: int, first: bool) -> HunkView:
    return HunkView(
        path=h.path, where=hunk_where(h), change=h.change,
        old_path=h.old_path if h.change == "renamed" else None, section=h.section,
        mechanisms=", ".join(h.mechanisms), score=Markup(f"{h.score:.1f}"),
        text=body if h.text else None,
        empty_note=Markup(EMPTY_HUNK.get(h.change, "no text changes (mode or type change)")),
        cut=cut, open=first and bool(h.mechanisms or h.evidence), evidence=h.evidence,
    )


# ---- one run's whole report ------------------------------------------------------------------

# Sections that may be left out to fit, first to go first; `checks` shrinks last (to the
# checks that did not pass, then to a count).
DROPPABLE = ("run_info", "chart", "looks", "pictures", "drain", "ttft", "guided_free", "wait",
             "where_time", "problems", "environment", "method")


@dataclass(frozen=True)
class RunView:
    label: str | None  # the runner's name in a matrix comment; None for a single run
    outcome: Outcome
    headline: str
    mode: str
    title: str
    runners: str  # which model runner the tables come from
    upgrade: str  # 'vLLM X -> Y' when the builds are two vLLM versions
    checks: list[CheckRow]
    checks_total: int
    checks_failing: int
    method: str
    cost: str
    has_results: bool
    guided_free: list[list[Markup]]
    ttft: list[list[Markup]]
    has_unique: bool
    wait: list[list[Markup | str]]
    drain: list[list[Markup]]
    chart: Markup
    chart_note: str
    warnings: list[str]
    errors: list[str]
    advice: list[str]
    earlier_test: str
    reported: list[list[str]]
    run_info: RunInfo | None
    hunks: HunksView | None
    where_time: Markup
    looks: list[LooksView] = field(default_factory=list)
    has_trend: bool = False  # the pictures table has a history column
    shown: frozenset[str] = frozenset(DROPPABLE)
    checks_hidden: int = 0  # passing checks left out to fit
    checks_collapsed: bool = False  # the table replaced by a count to fit

    @property
    def word(self) -> str:
        return self.outcome.value.upper()

    @property
    def acknowledged(self) -> list[CheckRow]:
        return [c for c in self.checks if c.acknowledged]

    @property
    def pictures(self) -> list[CheckRow]:
        """The checks with something to draw: an interval against a threshold, or history."""
        return [c for c in self.checks if c.bar != "–" or c.trend]

    @property
    def against(self) -> str:
        return AGAINST[self.mode]

    @property
    def show(self) -> dict[str, bool]:
        return {name: name in self.shown for name in DROPPABLE}


def reported_row(r: ReportedFigure) -> list[str]:
    """A reported baseline's figure beside this run's (shown, not judged)."""
    unit = f" {r.unit}" if r.unit else ""
    measured = f"{r.measured:.4g}{unit}" if r.measured is not None else "not measured"
    delta = f"{r.delta_pct:+.1f}%" if r.delta_pct is not None else "–"
    return [one_line(r.label, 120), f"{r.reported:.4g}{unit}", measured, delta]


def short_headline(v: Verdict) -> str:
    word = v.outcome.value.upper()
    return v.headline.removeprefix(f"{word}:").strip()  # compare's headline leads with it


def chart_note(name: str | None, note: str | None) -> str:
    if note:
        return one_line(note, 200)
    return one_line(f"PNG chart: {name} (job artifact).", 200) if name else ""


DEFAULT_TITLE = "Structured-output performance gate"


@dataclass(frozen=True, kw_only=True)
class RunInput:
    """Everything one run's report is made of: the verdict and what it was judged on."""

    verdict: Verdict
    head: Results | None = None
    base: Results | None = None
    hunks: HunkSet | None = None
    label: str | None = None
    title: str = DEFAULT_TITLE
    chart_series: dict | None = None
    chart_name: str | None = None
    chart_note: str | None = None
    profile_diff: ProfileDiff | None = None  # where the head spends more time (gate profile)
    evidence: Evidence | None = None  # the hunks ranked by that added time
    history: dict[str, list[float]] | None = None  # check -> its nights on the default branch
    trajectories: list[Trajectory] | None = None  # the sequential test look by look (A/B)

    def ranked_hunks(self) -> HunkSet | None:
        """The hunks as the report shows them: by measured evidence when there is some."""
        if self.hunks is None:
            return None
        return apply_evidence(self.hunks, self.evidence)


def run_view(ri: RunInput) -> RunView:
    v, head, base = ri.verdict, ri.head, ri.base
    return RunView(
        label=ri.label, outcome=v.outcome, headline=one_line(short_headline(v), 400),
        mode=v.mode, title=one_line(ri.title, 120), runners=one_line(runners_line(head, base), 300),
        upgrade=one_line(upgrade_line(head, base), 300),
        checks=[check_row(c, ri.history) for c in v.checks],
        checks_total=len(v.checks),
        checks_failing=sum(1 for c in v.checks if c.outcome != Outcome.PASS),
        method=one_line(v.method, 2000), cost=cost_line(v), has_results=head is not None,
        guided_free=guided_free_rows(head, base) if head is not None else [],
        ttft=ttft_rows(head, base) if head is not None else [],
        has_unique=head is not None and bool(head.cells_of("sweep", "unique")),
        wait=[wait_row(w) for w in wait_rows(head, base) if w.cause] if head is not None else [],
        drain=drain_rows(head, base) if head is not None else [],
        chart=Markup(mermaid_chart(ri.chart_series or {})),
        chart_note=chart_note(ri.chart_name, ri.chart_note) if head is not None else "",
        warnings=environment_warnings(v, head, base), errors=run_errors(v, head, base),
        advice=capped(v.advice), earlier_test=one_line(v.earlier_test or "", 400),
        reported=[reported_row(r) for r in v.reported],
        run_info=run_info(head, base) if head is not None else None,
        hunks=hunks_view(ri.hunks) if ri.hunks is not None else None,
        # render_where_time escapes every name and path it prints (gate.report.escape)
        where_time=Markup(render_where_time(ri.profile_diff, ri.evidence))
        if ri.profile_diff is not None else Markup(""),
        looks=looks_views(ri.trajectories),
        has_trend=any((ri.history or {}).get(c.name) for c in v.checks),
    )
