"""`gate history chart`: one check's nights on the default branch as a PNG (matplotlib, Agg),
a series per runner class, the levels detection found dashed, the change points as
vertical lines (red a regression, green an improvement, amber an acknowledged slowdown)."""

from __future__ import annotations

from pathlib import Path

from gate.history.model import Detection, Series
from gate.report.alert import level_line

COLOURS = ("#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f")
MARKS = {"regression": "#cf222e", "improvement": "#1a7f37", "acknowledged": "#9a6700"}


def write_history_png(path: Path, series: list[Series], detection: Detection) -> str | None:
    """Write the PNG; None, or a note saying why there is no chart."""
    if not series:
        return "no series to chart"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install 'gate[plot]'); no PNG chart"
    found = {d.key: d for d in detection.series}
    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=110)
    try:
        for i, s in enumerate(sorted(series, key=lambda s: s.runner_class)):
            colour = COLOURS[i % len(COLOURS)]
            xs = list(range(1, len(s.points) + 1))
            ax.plot(xs, s.values(), "-", marker="o", markersize=3, color=colour,
                    label=s.runner_class)
            det = found.get(s.key)
            if det is None:
                continue
            ax.plot(xs, level_line(s, det), "--", color=colour, linewidth=1, alpha=0.8)
            for cp in det.change_points:
                kind = "acknowledged" if cp.acknowledged else \
                    "regression" if cp.regression else "improvement"
                ax.axvline(cp.index + 0.5, color=MARKS[kind], linestyle=":", linewidth=1.5)
                ax.annotate(f"{cp.change_pct:+.0f}%", (cp.index + 0.6, max(s.values())),
                            color=MARKS[kind], fontsize=8)
        first = series[0]
        ax.set(xlabel="night on the default branch", ylabel=first.unit,
               title=f"{first.label}: {first.plan}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png", bbox_inches="tight")
    finally:
        plt.close(fig)
    return None
