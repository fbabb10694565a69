"""`gate history dashboard`: one self-contained HTML file of the default branch's history,
a chart per check with a series per runner class, the change points detection found and
the acknowledged slowdowns marked on it (docs/history.md, "Dashboard").

The charts are SVG drawn here from the figures (no script library, no font or file from
anywhere else: the file opens offline, as an artifact or on a Pages site); a few lines of
script only let a click on a legend entry hide or show that runner's series. Every text that
comes from the history (plan, check and runner names, commits, reasons) is HTML-escaped by
the template's autoescaping.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from dataclasses import dataclass, field

from jinja2 import Environment, PackageLoader, StrictUndefined

from gate import __version__
from gate.history.model import Detection, Series, SeriesDetection
from gate.report.alert import level_line

WIDTH, HEIGHT = 760, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 36
PALETTE = ("#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f")


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    tip: str


@dataclass(frozen=True, kw_only=True)
class Line:
    runner_class: str
    runner: int  # its place in the legend
    colour: str
    path: str
    levels: str
    dots: list[Dot]


@dataclass(frozen=True)
class Mark:
    """A change point or an acknowledged slowdown, drawn as a vertical line at its night."""

    x: float
    kind: str  # regression, improvement, acknowledged
    label: str
    tip: str


@dataclass(frozen=True)
class Tick:
    at: float
    label: str
    anchor: str = "middle"  # the first x tick starts at its place, the last ends there


@dataclass(kw_only=True)
class Chart:
    plan: str
    check: str
    label: str
    unit: str
    direction: str
    lines: list[Line] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    open_regressions: int = 0


def _when(at: str) -> float | None:
    try:
        return dt.datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    step = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * step:
            step *= m
            break
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def chart_for(plan: str, check: str, *, group: list[Series],
              found: dict[str, SeriesDetection], colours: dict[str, str]) -> Chart:
    first = group[0]
    chart = Chart(plan=plan, check=check, label=first.label, unit=first.unit,
                  direction=first.direction)
    times = [_when(p.at) for s in group for p in s.points]
    by_time = all(t is not None for t in times)
    xs_all = [t for t in times if t is not None] if by_time else \
        [float(i) for s in group for i in range(len(s.points))]
    x0, x1 = min(xs_all), max(xs_all)
    values = [p.value for s in group for p in s.points]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
    lo, hi = lo - pad, hi + pad

    def fx(x: float) -> float:
        return LEFT + (0.5 if x1 == x0 else (x - x0) / (x1 - x0)) * (WIDTH - LEFT - RIGHT)

    def fy(y: float) -> float:
        return TOP + (1 - (y - lo) / (hi - lo)) * (HEIGHT - TOP - BOTTOM)

    chart.y_ticks = [Tick(round(fy(v), 1), f"{v:.4g}") for v in _nice_ticks(lo, hi)]
    for s in sorted(group, key=lambda s: s.runner_class):
        xs = [(_when(p.at) or 0.0) if by_time else float(k) for k, p in enumerate(s.points)]
        ys = [p.value for p in s.points]
        det = found.get(s.key)
        levels = level_line(s, det) if det else []
        colour = colours[s.runner_class]
        path = " ".join(f"{'M' if k == 0 else 'L'}{fx(x):.1f},{fy(y):.1f}"
                        for k, (x, y) in enumerate(zip(xs, ys, strict=True)))
        cuts = [0, *[c.index for c in det.change_points], len(xs)] if det else []
        steps = " ".join(f"M{fx(xs[lo]):.1f},{fy(levels[lo]):.1f} L{fx(xs[hi - 1]):.1f},"
                         f"{fy(levels[lo]):.1f}" for lo, hi in zip(cuts, cuts[1:], strict=False)
                         if hi > lo)
        dots = [Dot(round(fx(x), 1), round(fy(y), 1),
                    f"{p.commit[:12]} · {p.at[:10]} · {y:.4g} {s.unit}")
                for x, y, p in zip(xs, ys, s.points, strict=True)]
        chart.lines.append(Line(runner_class=s.runner_class,
                                runner=list(colours).index(s.runner_class), colour=colour,
                                path=path, levels=steps, dots=dots))
        for cp in det.change_points if det else []:
            kind = "acknowledged" if cp.acknowledged else \
                "regression" if cp.regression else "improvement"
            x = fx((xs[cp.index - 1] + xs[cp.index]) / 2)
            tip = (f"{s.runner_class}: {cp.change_pct:+.1f}% between {cp.last_good[:12]} and "
                   f"{cp.first_bad[:12]} (p {cp.p_value:.1e}, {cp.persistence} nights)")
            if cp.acknowledged:
                tip += f"; acknowledged by {cp.acknowledged.login}: {cp.acknowledged.reason}"
            chart.marks.append(Mark(round(x, 1), kind, f"{cp.change_pct:+.0f}%", tip))
        chart.open_regressions += len(det.open_regressions()) if det else 0
    if by_time:
        at = [x0 + (x1 - x0) * k / 4 for k in range(5)]
        labels = [dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d") for t in at]
    else:
        at = [float(k) for k in sorted({0, int(x1) // 2, int(x1)})]
        labels = [f"night {int(k) + 1}" for k in at]
    chart.x_ticks = [Tick(round(fx(t), 1), label, "start" if i == 0 else
                          "end" if i == len(at) - 1 else "middle")
                     for i, (t, label) in enumerate(zip(at, labels, strict=True))]
    return chart


@dataclass(frozen=True, kw_only=True)
class Dashboard:
    title: str
    generated_at: str
    version: str
    charts: list[Chart]
    runner_classes: list[tuple[str, str]]  # (name, colour) over every chart
    nights: int

    @property
    def open_regressions(self) -> int:
        return sum(c.open_regressions for c in self.charts)


def dashboard(series: list[Series], detection: Detection, *, title: str) -> Dashboard:
    found = {d.key: d for d in detection.series}
    groups: dict[tuple[str, str], list[Series]] = defaultdict(list)
    for s in series:
        groups[(s.plan, s.check)].append(s)
    names = sorted({s.runner_class for s in series})
    colours = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}
    charts = [chart_for(plan, check, group=group, found=found, colours=colours)
              for (plan, check), group in sorted(groups.items())]
    classes = [(name, colours[name]) for name in names]
    return Dashboard(title=title,
                     generated_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                     version=__version__, charts=charts, runner_classes=classes,
                     nights=len({p.run_id for s in series for p in s.points}))


def render_dashboard(board: Dashboard) -> str:
    env = Environment(loader=PackageLoader("gate.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.get_template("dashboard.html.j2").render(
        board=board, width=WIDTH, height=HEIGHT, left=LEFT, right=RIGHT, top=TOP,
        bottom=BOTTOM)
