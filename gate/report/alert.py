"""The issue an alert opens for a change point on the default branch: its title and body.

The body starts with two hidden lines, the series' marker and the change point's range, by
which `gate history alert` finds its own issue again (gate.github.alerts); then the range,
the size, its significance and persistence, the nights as a chart with the levels found, and
what was done about it (the bisect dispatched over the range). Every value that comes from a
results file (labels, plan and runner names) is escaped (gate.report.escape); commits are
checked to be hex before they are printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from statistics import median

from gate.core.text import one_line
from gate.history.model import ChangePoint, Series, SeriesDetection
from gate.report.escape import md_inline
from gate.report.pictures import mermaid_series, sparkline

MARKER = "vllm-structured-output-gate-change-point"
GONE = "ℹ️ Detection no longer finds this change point; closing."
_HEX = re.compile(r"[0-9a-f]{7,64}")
_KEY = re.compile(r"[A-Za-z0-9_.:/-]{1,300}")


def series_marker(key: str) -> str:
    if not _KEY.fullmatch(key):
        raise ValueError(f"series key {key!r} has characters a marker cannot carry")
    return f"<!-- {MARKER}:{key} -->"


def range_tag(cp: ChangePoint) -> str:
    return f"<!-- {MARKER}-range:{sha(cp.last_good)}..{sha(cp.first_bad)} -->"


def bisect_tag(bisect: Bisect | None) -> str:
    """The hidden third line: whether the bisect was dispatched when the issue was opened."""
    word = "none" if bisect is None else "dispatched" if bisect.dispatched else "not-dispatched"
    return f"<!-- {MARKER}-bisect:{word} -->"


def sha(commit: str) -> str:
    """A commit as printed: hex only (a results file's commit could be anything)."""
    return commit if _HEX.fullmatch(commit) else "unknown"


@dataclass(frozen=True)
class Bisect:
    """What was done about the range: the bisect workflow dispatched, or why not."""

    workflow: str
    dispatched: bool
    note: str = ""


def issue_title(sd: SeriesDetection, cp: ChangePoint) -> str:
    """Plain text (GitHub renders no markdown in a title)."""
    return one_line(f"Perf regression on the default branch: {sd.label} {cp.change_pct:+.1f}% "
                    f"({sd.plan}, {sd.runner_class})", 240)


def level_line(series: Series, sd: SeriesDetection) -> list[float]:
    """Each night's level: the median of its segment between the change points found."""
    values = series.values()
    cuts = [0, *[c.index for c in sd.change_points], len(values)]
    out: list[float] = []
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        out += [median(values[lo:hi])] * (hi - lo)
    return out


def issue_body(series: Series, sd: SeriesDetection, cp: ChangePoint, *, server_url: str,
               repository: str, bisect: Bisect | None, state: str = "open") -> str:
    good, bad = sha(cp.last_good), sha(cp.first_bad)
    compare = f"{server_url.rstrip('/')}/{repository}/compare/{good}...{bad}"
    unit = md_inline(sd.unit, 20)
    lines = [
        series_marker(sd.key), range_tag(cp), bisect_tag(bisect), "",
        f"### 📉 {md_inline(sd.label, 120)}: {cp.change_pct:+.1f}% on the default branch",
        "",
        f"**{md_inline(sd.plan, 60)}** on **{md_inline(sd.runner_class, 120)}**",
        "",
        "| | |", "|---|---|",
        f"| Range | last good `{good[:12]}` → first slow `{bad[:12]}` ([compare]({compare})) |",
        f"| Level | {cp.before:.4g} → {cp.after:.4g} {unit} (medians of the nights before and "
        "after) |",
        f"| Size | {cp.change_pct:+.1f}% ({cp.sigmas:.1f}× the night-to-night noise of "
        f"{sd.sigma_pct or 0:.1f}%) |",
        f"| Significance | p = {cp.p_value:.1e} (t test of the two segments' logs) |",
        f"| Persistence | {cp.persistence} of {cp.nights_after} nights since on the new level |",
        "",
        f"Nights: {sparkline(series.values())}",
        "",
        str(mermaid_series(series.values(), level_line(series, sd),
                           title="nights on the default branch, and the levels found",
                           y_label=sd.unit.replace('"', "") or "value")),
        "",
    ]
    if bisect is not None:
        if bisect.dispatched:
            lines.append(f"🔎 The bisect over this range was dispatched: `{bisect.workflow}` "
                         f"with good `{good}`, bad `{bad}`; it posts its result here.")
        else:
            why = f" ({md_inline(bisect.note, 300)})" if bisect.note else ""
            lines.append(f"⚠️ The bisect was not dispatched{why}. Start it by hand: "
                         f"`{bisect.workflow}` with good `{good}` and bad `{bad}`.")
        lines.append("")
    if state == "recovered" and cp.recovered_at:
        lines.append(f"✅ Recovered: the level came back at `{sha(cp.recovered_at)[:12]}`; "
                     "closing.")
    elif state == "acknowledged" and cp.acknowledged:
        a = cp.acknowledged
        lines.append(f"➖ Acknowledged as intended in PR {a.pr} by {md_inline(a.login, 40)}: "
                     f"{md_inline(a.reason, 300)}; closing.")
    elif state == "gone":
        lines.append(GONE)
    lines += ["", "<sub>Opened and kept up to date by `gate history alert`; it closes the "
              "issue when the level recovers.</sub>"]
    return "\n".join(lines) + "\n"
