"""`gate history dashboard` looked at in headless Chromium: the file a history of nights writes
opens with no console error and no exception, shows a chart per check with a series per
runner class and its change points, and the screenshot has the series drawn in their colours.
Fails, never skips, without chromium (.ci/run installs it)."""

from __future__ import annotations

import numpy as np
from support import factories as f
from support.chromium import chromium_path, open_page
from support.cli import gate_in_process

from gate.history.replay import nights

FACTS = """({
  charts: document.querySelectorAll("svg.chart").length,
  series: document.querySelectorAll("g.series").length,
  dots: document.querySelectorAll("g.series circle").length,
  regressions: document.querySelectorAll("g.mark.regression").length,
  ready: document.body.getAttribute("data-ready"),
  open: document.getElementById("open-count").textContent,
  external: [...document.querySelectorAll("[src],[href]")].length
})"""
SERIES_COLOURS = {"#1565c0": (0x15, 0x65, 0xC0), "#c62828": (0xC6, 0x28, 0x28)}


def test_chromium_is_installed():
    assert chromium_path(), "chromium is missing: .ci/run installs it (apt-get install -y chromium)"


def test_the_dashboard_renders_its_charts_without_console_errors(tmp_path):
    db = tmp_path / "history.sqlite"
    runners = {"quiet": f.fingerprint(cores=2), "wide": f.fingerprint(cores=8)}
    for name, fp in runners.items():
        step = 121 / 233 if name == "quiet" else 1.0
        for i, rpm in enumerate(nights(30, level=233.0, sd=0.03, seed=len(name), step_at=20,
                                       step=step)):
            results = f.drain_results([rpm, rpm * 1.01], plan=f.cpu_plan(), fp=fp)
            folder = f.results_folder(tmp_path / f"{name}{i}", results)
            proc = gate_in_process("history", "add", folder, "--db", db, "--commit",
                                   f"{i + 1:040x}", "--commit-time",
                                   f"2026-01-{i + 1:02d}T03:00:00+00:00", "--branch", "main")
            assert proc.returncode == 0, proc.stderr
    html = tmp_path / "dashboard.html"
    assert gate_in_process("history", "dashboard", "--db", db, "--out", html).returncode == 0

    page = open_page(html, facts_js=FACTS)
    assert page.errors == []
    facts = page.facts
    assert facts["charts"] == 1 and facts["series"] == 2 and facts["dots"] == 60
    assert facts["regressions"] == 1 and facts["open"] == "1" and facts["ready"] == "1"
    assert facts["external"] == 0
    (tmp_path / "dashboard.png").write_bytes(page.screenshot)

    import matplotlib.image

    pixels = (matplotlib.image.imread(tmp_path / "dashboard.png")[..., :3] * 255).astype(int)
    for name, rgb in SERIES_COLOURS.items():
        near = (np.abs(pixels - np.array(rgb)).sum(axis=2) < 40).sum()
        assert near > 300, f"series colour {name} drawn on {near} pixels only"
    assert (pixels.sum(axis=2) < 600).mean() > 0.01  # something besides white was drawn


def test_the_browser_check_sees_a_page_that_logs_an_error_or_throws(tmp_path):
    """The check above can fail: a console error and an uncaught exception are both caught."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><svg class='chart'></svg><script>"
                    "console.error('drawn wrong'); undefinedFunction();</script></body></html>")
    seen = open_page(page, facts_js="document.querySelectorAll('svg.chart').length")
    assert seen.facts == 1
    assert any("drawn wrong" in e for e in seen.errors)
    assert any("undefinedFunction" in e for e in seen.errors)
