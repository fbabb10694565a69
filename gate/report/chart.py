"""Output throughput vs concurrency, guided and free, base and head: a PNG (matplotlib, Agg)
and a mermaid xychart for the markdown. Pure functions except `write_png`."""

from __future__ import annotations

from pathlib import Path
from statistics import median

from gate.measure.results import Results

# (build, arm) -> colour; the mermaid legend names them in this order, by colour name (a
# '#1565c0' outside code could read as an issue reference).
SERIES_STYLE = {
    ("head", "guided"): "#c62828",
    ("head", "free"): "#1565c0",
    ("base", "guided"): "#ef9a9a",
    ("base", "free"): "#90caf9",
}
COLOUR_NAMES = {"#c62828": "red", "#1565c0": "blue", "#ef9a9a": "light red", "#90caf9": "light blue"}


def throughput_by_level(results: Results, arm: str) -> dict[int, float]:
    """Median over repeats of the sweep's output tok/s per concurrency level."""
    levels: dict[int, list[float]] = {}
    for cell in results.cells_of("sweep", arm):
        levels.setdefault(cell.concurrency, []).append(cell.output_throughput)
    return {c: median(v) for c, v in sorted(levels.items())}


def chart_series(head: Results, base: Results | None) -> dict[tuple[str, str], dict[int, float]]:
    builds = {"head": head, "base": base}
    out = {}
    for build, arm in SERIES_STYLE:
        results = builds[build]
        if results is not None:
            points = throughput_by_level(results, arm)
            if points:
                out[(build, arm)] = points
    return out


def mermaid_chart(series: dict[tuple[str, str], dict[int, float]]) -> str:
    """A mermaid xychart-beta block; series missing a level are left out (mermaid has no
    gaps). Empty when there is nothing to draw."""
    levels = sorted({c for points in series.values() for c in points})
    full = {k: v for k, v in series.items() if all(c in v for c in levels)}
    if not levels or not full:
        return ""
    palette = ", ".join(SERIES_STYLE[k] for k in full)
    top = max(max(v.values()) for v in full.values())
    lines = [
        "```mermaid",
        f'%%{{init: {{"themeVariables": {{"xyChart": {{"plotColorPalette": "{palette}"}}}}}}}}%%',
        "xychart-beta",
        '    title "Output throughput vs concurrency"',
        "    x-axis \"concurrency\" [" + ", ".join(f'"{c}"' for c in levels) + "]",
        f'    y-axis "output tok/s" 0 --> {top * 1.1:.0f}',
    ]
    lines += ["    line [" + ", ".join(f"{v[c]:.1f}" for c in levels) + "]" for v in full.values()]
    lines.append("```")
    legend = " · ".join(f"{COLOUR_NAMES[SERIES_STYLE[k]]}: {k[0]} {k[1]}" for k in full)
    return "\n".join(lines) + f"\n\n<sub>Lines: {legend}.</sub>"


def write_png(path: Path, series: dict[tuple[str, str], dict[int, float]]) -> str | None:
    """Write the PNG; return None, or a note saying why there is no chart."""
    if not series:
        return "no sweep cells to chart"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install 'gate[plot]'); no PNG chart"
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    try:
        for (build, arm), points in series.items():
            style = "-" if build == "head" else "--"
            ax.plot(list(points), list(points.values()), style, marker="o",
                    color=SERIES_STYLE[(build, arm)], label=f"{build} {arm}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({c for p in series.values() for c in p}))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set(xlabel="concurrency", ylabel="output tok/s",
               title="Output throughput vs concurrency")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png", bbox_inches="tight")
    finally:
        plt.close(fig)
    return None
