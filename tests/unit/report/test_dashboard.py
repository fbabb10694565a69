"""The dashboard's HTML (gate.report.dashboard): one file, nothing fetched from elsewhere, a
chart per check with a series per runner class, change points and acknowledgements marked,
every name escaped. tests/integration/report/test_dashboard_chromium.py looks at it in a
browser."""

from __future__ import annotations

import re

from gate.history.detect import detect_store
from gate.history.model import Acknowledgement
from gate.history.replay import as_series, nights
from gate.report.dashboard import dashboard, render_dashboard
from gate.report.history_chart import write_history_png


def history(evil=False):
    quiet = as_series(nights(40, level=233.0, sd=0.03, seed=1, step_at=25, step=0.6),
                      runner_class="cpu: <script>alert(1)</script>" if evil else "cpu: quiet")
    other = as_series(nights(40, level=180.0, sd=0.05, seed=2), runner_class="gpu: A100")
    tpot = as_series(nights(40, level=20.0, sd=0.03, seed=3, step_at=15, step=1.3),
                     check="sweep.c8.tpot_p50_ms", label="TPOT p50 (guided, c=8)", unit="ms",
                     direction="lower_is_better", runner_class="cpu: quiet")
    ack = Acknowledgement(repository="o/r", pr=7, head_sha="e" * 40, check="sweep.c8.tpot_p50_ms",
                          reason="bigger grammar <b>on purpose</b>", login="maintainer",
                          permission="write", created_at="2026-01-01",
                          merged_commit=tpot.points[15].commit)
    series = [quiet, other, tpot]
    return series, detect_store(series, acknowledgements=[ack])


def test_one_self_contained_file_with_a_chart_per_check_and_a_series_per_runner():
    series, detection = history()
    html = render_dashboard(dashboard(series, detection, title="Nightly"))
    assert html.count('<svg class="chart"') == 2
    assert html.count('class="series"') == 3
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', html)  # nothing from elsewhere
    assert "<link" not in html and "@import" not in html
    assert 'class="mark regression"' in html and 'class="mark acknowledged"' in html
    assert "1 open regression(s)" in html
    assert "acknowledged by maintainer: bigger grammar &lt;b&gt;on purpose&lt;/b&gt;" in html


def test_every_name_from_the_history_is_escaped():
    series, detection = history(evil=True)
    html = render_dashboard(dashboard(series, detection, title="<i>t</i>"))
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert "<i>t</i>" not in html
    assert html.count("<script>") == 1  # the legend's own


def test_the_png_chart_is_written(tmp_path):
    series, detection = history()
    out = tmp_path / "chart.png"
    assert write_history_png(out, series[:2], detection) is None
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert write_history_png(out, [], detection) == "no series to chart"
