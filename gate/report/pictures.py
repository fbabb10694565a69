"""Small pictures that render anywhere markdown does (a PR comment, a job summary, an issue,
a Buildkite annotation): no image hosting, only characters the gate chooses itself.

- `interval_bar`: a check's change and its interval against its threshold on one line, worse
  to the right whatever the check's direction (`│` no change, `┆` the threshold, `■` the
  change, `─` its interval, `◂`/`▸` an end past the edge);
- `sparkline`: a series as ▁▂▃▄▅▆▇█ (a check's history on the default branch);
- `mermaid_series`: a series with the levels detection found, as a mermaid line chart;
- `mermaid_looks`: the sequential test look by look, the change it saw against the threshold
  it fails past.

Every function returns Markup built from numbers and fixed characters only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from markupsafe import Markup

from gate.judge.verdict import Check

BAR_WIDTH = 23
BLOCKS = "▁▂▃▄▅▆▇█"


def badness(check: Check, pct: float) -> float:
    """A change in percent with worse as positive, whatever the check's direction."""
    return pct if check.direction == "lower_is_better" else -pct


def interval_bar(check: Check, width: int = BAR_WIDTH) -> Markup:
    """One line: the check's interval and change against its threshold (relative checks
    with an interval); a dash otherwise."""
    if check.kind != "relative" or check.delta_pct is None or check.ci_low_pct is None \
            or check.ci_high_pct is None:
        return Markup("–")
    lo, hi = sorted((badness(check, check.ci_low_pct), badness(check, check.ci_high_pct)))
    mid, limit = badness(check, check.delta_pct), float(check.threshold)
    # the scale runs from -span to +span percent: twice the threshold, widened to show the
    # interval up to six times the threshold (further out, its end is an arrow)
    span = max(2.0 * limit, min(max(abs(lo), abs(hi)) * 1.1, 6.0 * limit), 1.0)

    def col(x: float) -> int:
        return round((x + span) / (2 * span) * (width - 1))

    cells = ["·"] * width
    a, b = col(max(lo, -span)), col(min(hi, span))
    for i in range(max(a, 0), min(b, width - 1) + 1):
        cells[i] = "─"
    cells[col(0.0)] = "│"
    cells[col(limit)] = "┆"
    if lo < -span:
        cells[0] = "◂"
    if hi > span:
        cells[-1] = "▸"
    cells[min(max(col(mid), 1), width - 2)] = "■"
    return Markup("`" + "".join(cells) + "`")


def sparkline(values: Sequence[float]) -> Markup:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return Markup("")
    lo, hi = min(finite), max(finite)
    out = []
    for v in values:
        if not math.isfinite(v):
            out.append(" ")
            continue
        k = 0 if hi == lo else round((v - lo) / (hi - lo) * (len(BLOCKS) - 1))
        out.append(BLOCKS[k])
    return Markup("".join(out))


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _init(*colours: str) -> str:
    """Mermaid's init line: the lines' colours in order, and a chart short enough to sit in
    a comment."""
    palette = ", ".join(colours)
    return ('%%{init: {"xyChart": {"width": 640, "height": 260}, "themeVariables": '
            f'{{"xyChart": {{"plotColorPalette": "{palette}"}}}}}}}}%%')


def mermaid_series(values: Sequence[float], levels: Sequence[float] | None, *, title: str,
                   y_label: str) -> Markup:
    """A mermaid xychart: the nights as a line (blue), and (when given) the level of each
    night's segment as a second line (grey: the step detection found). `title` and `y_label` must be the
    gate's own words (they are quoted, not escaped)."""
    if not values:
        return Markup("")
    top = max(max(values), *(levels or [0.0])) * 1.1
    safe = [t.replace('"', "'") for t in (title, y_label)]
    lines = ["```mermaid", _init("#1565c0", "#8c959f"), "xychart-beta", f'    title "{safe[0]}"',
             f'    x-axis "night" 1 --> {len(values)}', f'    y-axis "{safe[1]}" 0 --> {_fmt(top)}',
             "    line [" + ", ".join(_fmt(v) for v in values) + "]"]
    if levels:
        lines.append("    line [" + ", ".join(_fmt(v) for v in levels) + "]")
    lines.append("```")
    return Markup("\n".join(lines))


def mermaid_looks(changes: Sequence[float], rounds: Sequence[int], *, threshold: float,
                  title: str) -> Markup:
    """The change (%) the sequential test saw at each look (x: the look's round, red), with the
    threshold it fails past (grey) and no change (green) as flat lines."""
    if not changes:
        return Markup("")
    lo = min(min(changes), threshold, 0.0)
    hi = max(max(changes), threshold, 0.0)
    pad = (hi - lo) * 0.2 or 1.0
    labels = ", ".join(f'"r{r}"' for r in rounds)
    safe = title.replace('"', "'")
    return Markup("\n".join([
        "```mermaid", _init("#c62828", "#8c959f", "#2e7d32"), "xychart-beta",
        f'    title "{safe}"', f"    x-axis [{labels}]",
        f'    y-axis "change (%)" {_fmt(lo - pad)} --> {_fmt(hi + pad)}',
        "    line [" + ", ".join(_fmt(v) for v in changes) + "]",
        "    line [" + ", ".join(_fmt(threshold) for _ in changes) + "]",
        "    line [" + ", ".join(_fmt(0.0) for _ in changes) + "]", "```"]))
