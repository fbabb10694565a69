"""`gate report`: verdict.json + results.json (+ hunks.json) -> one markdown document for the
PR comment and the job summary.

Order: the verdict in one line, the checks table, the guided/free table per concurrency and
the drain, a throughput chart, environment warnings, errors and advice, run info, then the
diff hunks in collapsible sections, ranked first. The document fits `max_chars` (GitHub's
65,536-character comment limit) by trimming hunks only: whole hunks from the end, then long
hunk bodies; the verdict line and the checks table are never cut. Every untrusted string goes
through gate.report_escape. All functions here are pure; I/O lives in gate.report_cli.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from statistics import median
from string import Template

from gate import __version__
from gate.fingerprint import Fingerprint, warnings_for
from gate.hunks import Hunk, HunkSet
from gate.report_chart import mermaid_chart
from gate.report_escape import code_block, html_text, md_inline, truncate_lines
from gate.results import Results
from gate.verdict import Check, Outcome, Verdict

GITHUB_COMMENT_LIMIT = 65_536
DEFAULT_TITLE = "Structured-output performance gate"
BODY_CAPS = (None, 4000, 1000)  # hunk body caps tried in turn when hunks must be trimmed
MAX_LIST_ITEMS = 20
EMOJI = {Outcome.PASS: "✅", Outcome.FAIL: "❌", Outcome.INCONCLUSIVE: "⚠️", Outcome.ERROR: "💥"}
DASH = "–"


@cache
def template(name: str) -> Template:
    return Template(resources.files("gate").joinpath("templates").joinpath(name).read_text())


# ---- numbers ---------------------------------------------------------------------------------


def fmt_num(x: float | None) -> str:
    if x is None:
        return DASH
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.1f}"
    return f"{x:.3g}" if abs(x) >= 0.01 or x == 0 else f"{x:.2e}"


def fmt_value(x: float | None, unit: str) -> str:
    if x is None:
        return DASH
    if unit == "share":
        return f"{x:.1%}"
    if unit == "x":
        return f"{fmt_num(x)}×"
    return f"{fmt_num(x)} {md_inline(unit, 20)}".rstrip()


def fmt_pct(x: float | None) -> str:
    return DASH if x is None else f"{x:+.1f}%"


def fmt_interval(c: Check) -> str:
    if c.ci_low_pct is not None and c.ci_high_pct is not None:
        return f"[{c.ci_low_pct:+.1f}%, {c.ci_high_pct:+.1f}%]"
    if c.ci_low is not None and c.ci_high is not None:  # absolute checks: the ratio's interval
        return f"[{fmt_num(c.ci_low)}, {fmt_num(c.ci_high)}]"
    return DASH


def fmt_threshold(c: Check) -> str:
    lower = c.direction == "lower_is_better"
    if c.kind == "relative":
        return f"≤ +{c.threshold:g}%" if lower else f"≥ −{c.threshold:g}%"
    bound = fmt_value(c.threshold, c.unit) if c.unit in ("share", "x") else f"{c.threshold:g}"
    return f"≤ {bound}" if lower else f"≥ {bound}"


def fmt_outcome(o: Outcome) -> str:
    return f"{EMOJI[o]} {o.value}"


def med(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return median(present) if present else None


# ---- verdict and checks ----------------------------------------------------------------------


def verdict_line(v: Verdict) -> str:
    word = v.outcome.value.upper()
    headline = v.headline.removeprefix(f"{word}:").strip()  # compare's headline leads with it
    return f"### {EMOJI[v.outcome]} {word}: {md_inline(headline, 400)}"


def subtitle(v: Verdict, title: str) -> str:
    against = {"ab": "base build vs head build, same runner", "baseline": "stored baseline",
               "absolute": "absolute bounds only"}[v.mode]
    return f"**{md_inline(title, 120)}** · compared against: {against}"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def check_row(c: Check) -> list[str]:
    label = md_inline(c.label or c.name, 120)
    outcome = fmt_outcome(c.outcome) + (f" ({md_inline(c.note, 160)})" if c.note else "")
    return [label, fmt_value(c.base, c.unit), fmt_value(c.head, c.unit), fmt_pct(c.delta_pct),
            fmt_interval(c), fmt_threshold(c), outcome]


def checks_table(v: Verdict) -> str:
    if not v.checks:
        return "_No checks were run._"
    header = ["Check", "Base", "Head", "Δ", "Interval", "Threshold", "Outcome"]
    out = table(header, [check_row(c) for c in v.checks])
    if v.method:
        out += (f"\n\n<details><summary>How the intervals are computed</summary>\n\n"
                f"{md_inline(v.method, 2000)}\n\n</details>")
    return out


# ---- guided vs free, drain -------------------------------------------------------------------


@dataclass(frozen=True)
class LevelFigures:
    guided_tpot: float | None
    free_tpot: float | None
    ratio: float | None
    guided_tps: float | None
    free_tps: float | None


def level_figures(r: Results, c: int) -> LevelFigures:
    g, f = r.cells_of("sweep", "guided", c), r.cells_of("sweep", "free", c)
    g_tpot = med([x.tpot_ms.p50 if x.tpot_ms else None for x in g])
    f_tpot = med([x.tpot_ms.p50 if x.tpot_ms else None for x in f])
    ratio = med([x.tpot_p50_ratio for x in r.ratios if x.concurrency == c])
    if ratio is None and g_tpot is not None and f_tpot:
        ratio = g_tpot / f_tpot
    return LevelFigures(g_tpot, f_tpot, ratio, med([x.output_throughput for x in g]),
                        med([x.output_throughput for x in f]))


def fmt_ratio(ratio: float | None, r: Results, c: int) -> str:
    if ratio is None:
        return DASH
    t = r.plan.thresholds
    over = t.guided_free_tpot_ratio and c >= t.ratio_min_concurrency and ratio > t.guided_free_tpot_ratio
    return f"**{ratio:.2f}×** ⚠️" if over else f"{ratio:.2f}×"


def builds(head: Results, base: Results | None) -> list[tuple[str, Results]]:
    return [("base", base), ("head", head)] if base is not None else [("head", head)]


def guided_free_table(head: Results, base: Results | None) -> str:
    pairs = builds(head, base)
    levels = sorted({c.concurrency for _, r in pairs for c in r.cells_of("sweep")})
    if not levels:
        return ""
    rows = []
    for c in levels:
        for name, r in pairs:
            lf = level_figures(r, c)
            rows.append([str(c), name, fmt_num(lf.guided_tpot), fmt_num(lf.free_tpot),
                         fmt_ratio(lf.ratio, r, c), fmt_num(lf.guided_tps), fmt_num(lf.free_tps)])
    header = ["Concurrency", "Build", "Guided TPOT p50 (ms)", "Free TPOT p50 (ms)",
              "Guided/free TPOT", "Guided tok/s", "Free tok/s"]
    return "#### Guided vs free per concurrency\n\n" + table(header, rows)


def validity(r: Results) -> str:
    guided = [c for c in r.cells if c.arm == "guided"]
    valid = sum(c.valid_outputs for c in guided)
    total = valid + sum(c.invalid_outputs for c in guided)
    lengths = sum(c.length_finishes for c in guided)
    if not total:
        return DASH
    return f"{valid}/{total}" + (f", {lengths} cut by length" if lengths else "")


def drain_row(name: str, r: Results) -> list[str] | None:
    cells = r.cells_of("drain")
    if not cells:
        return None
    done = f"{sum(c.completed for c in cells)}/{sum(c.requests for c in cells)}"
    return [name, done, fmt_num(med([c.duration_s for c in cells])),
            fmt_num(med([c.requests_per_min for c in cells])),
            fmt_num(med([c.output_throughput for c in cells])), validity(r)]


def drain_table(head: Results, base: Results | None) -> str:
    rows = [row for name, r in builds(head, base) if (row := drain_row(name, r))]
    if not rows:
        return ""
    header = ["Build", "Completed", "Drain (s)", "req/min", "Output tok/s", "Valid JSON (all guided)"]
    return "#### Guided-JSON drain\n\n" + table(header, rows)


# ---- chart, environment, problems, run info --------------------------------------------------


def chart_section(series: dict, chart_name: str | None, chart_note: str | None) -> str:
    parts = [mermaid_chart(series)]
    if chart_name and not chart_note:
        parts.append(f"<sub>PNG chart: {md_inline(chart_name, 120)} (job artifact).</sub>")
    if chart_note:
        parts.append(f"<sub>{md_inline(chart_note, 200)}</sub>")
    body = "\n\n".join(p for p in parts if p)
    return "#### Output throughput vs concurrency\n\n" + body if body else ""


def bullets(items: list[str], limit: int = 600) -> str:
    shown = [f"- {md_inline(x, limit)}" for x in items[:MAX_LIST_ITEMS]]
    if len(items) > MAX_LIST_ITEMS:
        shown.append(f"- … and {len(items) - MAX_LIST_ITEMS} more")
    return "\n".join(shown)


def unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def environment_warnings(v: Verdict, head: Results, base: Results | None) -> list[str]:
    out = warnings_for(head.fingerprint) + v.warnings
    if base is not None:
        out += [f"base: {w}" for w in warnings_for(base.fingerprint)]
        hb, hh = base.fingerprint.hardware_key, head.fingerprint.hardware_key
        if hb != hh:
            out.append(f"base ran on {hb} but head on {hh}: A/B figures are not comparable")
    return unique(out)


def environment_section(v: Verdict, head: Results, base: Results | None) -> str:
    warnings = environment_warnings(v, head, base)
    return "#### ⚠️ Environment warnings\n\n" + bullets(warnings) if warnings else ""


def problems_section(v: Verdict, head: Results, base: Results | None) -> str:
    errors = v.errors + [f"head run: {e}" for e in head.errors]
    if base is not None:
        errors += [f"base run: {e}" for e in base.errors]
    parts = []
    if errors := unique(errors):
        parts.append("#### Errors\n\n" + bullets(errors))
    if advice := unique(v.advice):
        parts.append("#### What to do\n\n" + bullets(advice))
    return "\n\n".join(parts)


def vllm_version(fp: Fingerprint) -> str:
    version = fp.vllm_version or "unknown"
    return version + (f" ({fp.vllm_commit})" if fp.vllm_commit else "")


def threads_info(fp: Fingerprint) -> str:
    quota = fp.cpu_quota.quota_cpus
    return (f"{fp.torch_threads if fp.torch_threads is not None else '?'} torch threads; "
            f"{fp.host_cores} host cores; quota {f'{quota:g}' if quota else 'none'}; "
            f"OMP_NUM_THREADS={fp.omp_num_threads or 'unset'}")


def timings(r: Results) -> str:
    if not r.timings_s:
        return DASH
    return ", ".join(f"{k.removesuffix('_s')} {v:.0f} s" for k, v in r.timings_s.items())


def run_info_rows(r: Results) -> list[str]:
    fp = r.fingerprint
    return [r.plan.name, r.plan_hash, fp.hardware_key, vllm_version(fp), threads_info(fp),
            str(r.plan.repeats), r.status, timings(r), r.created_at]


def run_info_section(head: Results, base: Results | None) -> str:
    labels = ["Plan", "Plan hash", "Hardware", "vLLM", "Threads", "Repeats", "Status",
              "Time", "Created"]
    pairs = builds(head, base)
    columns = [[md_inline(x, 200) for x in run_info_rows(r)] for _, r in pairs]
    rows = [[label, *(col[i] for col in columns)] for i, label in enumerate(labels)]
    body = table(["", *(name for name, _ in pairs)], rows)
    return f"<details><summary>Run info</summary>\n\n{body}\n\n</details>"


# ---- hunks -----------------------------------------------------------------------------------


def line_range(start: int, count: int) -> str:
    return f"L{start}" if count == 1 else f"L{start}–{start + count - 1}"


def hunk_where(h: Hunk) -> str:
    if h.new_lines:
        return " " + line_range(h.new_start, h.new_lines)
    if h.old_lines:
        return " old " + line_range(h.old_start, h.old_lines)
    return ""


def hunk_summary(h: Hunk) -> str:
    parts = [f"{'🔥' if h.mechanisms else '📄'} <code>{html_text(h.path)}</code>{hunk_where(h)}"]
    if h.change == "renamed" and h.old_path:
        parts.append(f"renamed from <code>{html_text(h.old_path)}</code>")
    elif h.change != "modified":
        parts.append(html_text(h.change, 20))
    if h.section:
        parts.append(f"<code>{html_text(h.section, 80)}</code>")
    if h.mechanisms:
        parts.append(f"<b>{html_text(', '.join(h.mechanisms))}</b> (score {h.score:.1f})")
    return " · ".join(parts)


def hunk_content(h: Hunk, cap: int | None) -> tuple[str, bool]:
    if not h.text:
        what = {"binary": "binary file: no text diff", "renamed": "renamed without changes",
                "added": "empty file added", "deleted": "empty file deleted"}
        return f"_{what.get(h.change, 'no text changes (mode or type change)')}_", False
    body, cut = truncate_lines(h.text, cap) if cap else (h.text, 0)
    content = code_block(body, "diff")
    if cut:
        content += f"\n\n_… {cut} more line(s) of this hunk left out; full text in hunks.json._"
    return content, bool(cut)


def render_hunk(h: Hunk, cap: int | None, open_: bool) -> tuple[str, bool]:
    content, truncated = hunk_content(h, cap)
    text = template("hunk.md").substitute(
        open=" open" if open_ else "", summary=hunk_summary(h), content=content
    )
    return text.rstrip("\n"), truncated


def hunks_header(hs: HunkSet) -> str:
    ranked = sum(1 for h in hs.hunks if h.mechanisms)
    files = len({h.path for h in hs.hunks})
    return (f"#### Changes in watched paths\n\n{len(hs.hunks)} hunk(s) in {files} file(s) "
            f"({hs.files_watched} of {hs.files_changed} changed files are watched; merge-base "
            f"<code>{html_text(hs.merge_base[:12])}</code>); {ranked} touch mechanisms of known "
            "regressions and come first (🔥).")


@dataclass(frozen=True)
class FittedHunks:
    blocks: list[str]
    truncated: int


def fit_prefix(hunks: list[Hunk], cap: int | None, budget: int) -> FittedHunks:
    """The longest prefix of rendered hunks (bodies capped at `cap`) within `budget` chars."""
    blocks, size, truncated = [], 0, 0
    for i, h in enumerate(hunks):
        block, cut = render_hunk(h, cap, open_=(i == 0 and bool(h.mechanisms)))
        if size + len(block) + 2 > budget:
            break
        blocks.append(block)
        size += len(block) + 2
        truncated += cut
    return FittedHunks(blocks, truncated)


def fit_hunks(hunks: list[Hunk], budget: int) -> FittedHunks:
    """Whole hunks go from the end first; bodies are capped only when that keeps more hunks."""
    best = FittedHunks([], 0)
    for cap in BODY_CAPS:
        fitted = fit_prefix(hunks, cap, budget)
        if len(fitted.blocks) > len(best.blocks):
            best = fitted
        if len(best.blocks) == len(hunks):
            break
    return best


def trim_note(total: int, fitted: FittedHunks, limit: int) -> str:
    left_out = total - len(fitted.blocks)
    if not left_out and not fitted.truncated:
        return ""
    return (f"✂️ To fit GitHub's {limit:,}-character comment limit, {left_out} of {total} "
            f"hunk(s) were left out (lowest ranked first) and {fitted.truncated} long hunk "
            "body(ies) truncated; hunks.json has them all.")


TRIM_NOTE_RESERVE = 300


def hunks_section(hs: HunkSet, budget: int, limit: int) -> str:
    header = hunks_header(hs)
    if not hs.hunks:
        return header.split("\n\n")[0] + "\n\nNo changes in the watched paths."
    fitted = fit_hunks(hs.hunks, budget - len(header) - TRIM_NOTE_RESERVE)
    note = trim_note(len(hs.hunks), fitted, limit)
    return "\n\n".join(p for p in [header, note, *fitted.blocks] if p)


# ---- assembly --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportInput:
    verdict: Verdict
    head: Results
    base: Results | None = None
    hunks: HunkSet | None = None
    title: str = DEFAULT_TITLE
    max_chars: int = GITHUB_COMMENT_LIMIT
    chart_series: dict | None = None
    chart_name: str | None = None
    chart_note: str | None = None


# Sections that may go when even the report without hunks is over the limit, first to go first.
DROPPABLE = ("run_info", "chart", "drain", "guided_free", "problems", "environment")


def sections(ri: ReportInput) -> dict[str, str]:
    return {
        "checks": checks_table(ri.verdict),
        "guided_free": guided_free_table(ri.head, ri.base),
        "drain": drain_table(ri.head, ri.base),
        "chart": chart_section(ri.chart_series or {}, ri.chart_name, ri.chart_note),
        "environment": environment_section(ri.verdict, ri.head, ri.base),
        "problems": problems_section(ri.verdict, ri.head, ri.base),
        "run_info": run_info_section(ri.head, ri.base),
    }


def assemble(ri: ReportInput, parts: dict[str, str], hunks: str) -> str:
    footer = f"gate {__version__} · mode {ri.verdict.mode}"
    body = "\n\n".join(p for p in [*parts.values(), hunks] if p)
    return template("comment.md").substitute(
        verdict_line=verdict_line(ri.verdict), subtitle=subtitle(ri.verdict, ri.title),
        body=body, footer=footer,
    )


def render_report(ri: ReportInput) -> str:
    """The whole markdown document, at most `ri.max_chars` long unless the verdict line and
    the checks table alone are longer (they are never cut)."""
    parts = sections(ri)
    for name in DROPPABLE:
        if len(assemble(ri, parts, "")) <= ri.max_chars:
            break
        parts[name] = ""
    if ri.hunks is None:
        return assemble(ri, parts, "")
    budget = ri.max_chars - len(assemble(ri, parts, "")) - 2
    if budget < TRIM_NOTE_RESERVE + 200:
        note = f"✂️ {len(ri.hunks.hunks)} watched hunk(s) left out to fit the comment limit."
        return assemble(ri, parts, note if len(note) + 2 <= budget else "")
    return assemble(ri, parts, hunks_section(ri.hunks, budget, ri.max_chars))
