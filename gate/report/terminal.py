"""Plain-text tables for the terminal (pure functions): a results.json, and a verdict."""

from __future__ import annotations

from tabulate import tabulate

from gate.judge.verdict import Check, Verdict
from gate.measure.results import Distribution, Results
from gate.runner.fingerprint import runner_line


def _p(d: Distribution | None, attr: str) -> str:
    return "-" if d is None else f"{getattr(d, attr):.1f}"


def cells_table(results: Results) -> str:
    rows = []
    for c in results.cells:
        valid = f"{c.valid_outputs}/{c.completed}" if c.arm != "free" else "-"
        rows.append([
            c.phase, c.arm, c.concurrency, c.repeat + 1, f"{c.completed}/{c.requests}",
            f"{c.duration_s:.1f}", f"{c.requests_per_min:.0f}", f"{c.output_throughput:.0f}",
            _p(c.ttft_ms, "p50"), _p(c.tpot_ms, "p50"), _p(c.tpot_ms, "p99"),
            _p(c.itl_ms, "p99"), _p(c.e2el_ms, "p50"), valid,
        ])
    headers = ["phase", "arm", "conc", "rep", "ok", "dur s", "req/min", "out tok/s",
               "TTFT p50 ms", "TPOT p50 ms", "TPOT p99 ms", "ITL p99 ms", "E2EL p50 ms", "valid"]
    return tabulate(rows, headers=headers, disable_numparse=True)


def ratios_table(results: Results) -> str:
    def x(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    rows = [[r.concurrency, r.repeat + 1, x(r.tpot_p50_ratio), x(r.output_throughput_ratio),
             x(r.ttft_p50_ratio), x(r.unique_ttft_p50_ratio)] for r in results.ratios]
    return tabulate(rows, headers=["conc", "rep", "guided/free TPOT p50", "guided/free out tok/s",
                                   "guided/free TTFT p50", "unique/free TTFT p50"],
                    disable_numparse=True)


def timings_line(results: Results) -> str:
    t = results.timings_s
    total = t.get("total_s", 0.0)
    parts = [f"{k.removesuffix('_s')} {v:.0f}s" for k, v in t.items() if k != "total_s"]
    return f"total {total:.0f}s: " + ", ".join(parts)


def render(results: Results) -> str:
    fp = results.fingerprint
    quota = fp.cpu_quota.quota_cpus
    head = [
        f"plan {results.plan.name} (hash {results.plan_hash}), label {results.label}, "
        f"status {results.status.upper()}",
        f"hardware {fp.hardware_key}; host cores {fp.host_cores}, CPU quota "
        f"{'none' if quota is None else f'{quota:g}'}, torch threads {fp.torch_threads}"
        f"{f' ({fp.torch_threads_source})' if fp.torch_threads_source else ''}, "
        f"OMP_NUM_THREADS {fp.omp_num_threads or 'unset'}",
        f"vllm {fp.vllm_version or '?'}, "
        f"torch {fp.versions.get('torch', '?')}, "
        f"{results.plan.backend} backend ({fp.backend_package(results.plan.backend)}), "
        f"{runner_line(fp)}",
        "",
        cells_table(results),
    ]
    if results.ratios:
        head += ["", ratios_table(results)]
    head += ["", "where the time went: " + timings_line(results)]
    if results.errors:
        head += ["", "MEASUREMENT ERRORS:"] + [f"  - {e}" for e in results.errors]
    return "\n".join(head)


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return ""
    if unit == "share":
        return f"{value:.1%}"
    return f"{value:.4g}"


def _check_row(c: Check, *, footnote: int | None = None) -> list[str]:
    if c.kind == "relative":
        delta = f"{c.delta_pct:+.1f}%"
        interval = "none yet" if c.ci_low_pct is None or c.ci_high_pct is None else \
            ("range " if c.interval_is_range else "") + f"{c.ci_low_pct:+.1f}% .. {c.ci_high_pct:+.1f}%"
        threshold = f"{'-' if c.direction == 'higher_is_better' else '+'}{c.threshold:g}%"
    else:
        delta = ""
        interval = f"{c.ci_low:.3g} .. {c.ci_high:.3g}" if c.ci_low is not None else ""
        threshold = f"{'>=' if c.direction == 'higher_is_better' else '<='} {_fmt(c.threshold, c.unit)}"
    outcome = f"{c.outcome.value} (improved)" if c.improved else c.outcome.value
    if footnote is not None:
        outcome += f" [{footnote}]"  # the check's own note, under the table
    return [c.label, _fmt(c.base, c.unit), _fmt(c.head, c.unit), delta, interval, threshold,
            outcome]


def render_verdict(v: Verdict) -> str:
    """The verdict line first, then every check, then errors, notes and advice."""
    lines = [v.headline, ""]
    noted = [c for c in v.checks if c.note]
    marks = {id(c): i for i, c in enumerate(noted, 1)}
    if v.checks:
        headers = ["metric", "base", "head", "delta", "interval", "threshold", "outcome"]
        rows = [_check_row(c, footnote=marks.get(id(c))) for c in v.checks]
        lines.append(tabulate(rows, headers=headers, disable_numparse=True))
    check_notes = [f"[{i}] {c.label}: {c.note}" for i, c in enumerate(noted, 1)]
    earlier = [v.earlier_test] if v.earlier_test else []
    for title, items in (("check notes", check_notes), ("warnings", v.warnings),
                         ("errors", v.errors), ("notes", v.notes), ("advice", v.advice),
                         ("rerun", earlier)):
        if items:
            lines += ["", f"{title}:"] + [f"  - {item}" for item in items]
    return "\n".join(lines)
