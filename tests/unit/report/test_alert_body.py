"""The change-point issue (gate.report.alert): hidden marker lines first, the range, size,
significance and persistence, the chart, the bisect; untrusted names escaped."""

from __future__ import annotations

import pytest
from support import markdown_check

from gate.history.detect import detect_series
from gate.history.replay import as_series, nights
from gate.report.alert import (
    MARKER,
    Bisect,
    bisect_tag,
    issue_body,
    issue_title,
    level_line,
    range_tag,
    series_marker,
    sha,
)

SHAS = [f"{i:02x}" * 20 for i in range(60)]


def found(label="drain req/min (guided)", runner="cpu: Test CPU; cpus 2; quota none"):
    values = nights(60, level=233.0, sd=0.03, seed=1, step_at=40, step=121 / 233)
    series = as_series(values, label=label, runner_class=runner, commits=SHAS)
    return series, detect_series(series)


def test_the_body_leads_with_its_marker_range_and_bisect_lines():
    series, sd = found()
    (cp,) = sd.change_points
    body = issue_body(series, sd, cp, server_url="https://github.com", repository="o/r",
                      bisect=Bisect("gate-bisect.yml", True))
    lines = body.split("\n")
    assert lines[0] == series_marker(sd.key) == f"<!-- {MARKER}:{sd.key} -->"
    assert lines[1] == range_tag(cp) == f"<!-- {MARKER}-range:{SHAS[39]}..{SHAS[40]} -->"
    assert lines[2] == bisect_tag(Bisect("x", True))
    assert f"https://github.com/o/r/compare/{SHAS[39]}...{SHAS[40]}" in body
    assert "| Size | -48" in body and "| Significance | p = " in body
    assert "| Persistence | 20 of 20 nights" in body
    assert "```mermaid" in body and "The bisect over this range was dispatched" in body


def test_a_bisect_not_dispatched_says_how_to_start_it():
    series, sd = found()
    body = issue_body(series, sd, sd.change_points[0], server_url="https://github.com",
                      repository="o/r", bisect=Bisect("gate-bisect.yml", False, "HTTP 403"))
    assert "not dispatched (HTTP 403). Start it by hand: `gate-bisect.yml`" in body
    assert body.split("\n")[2] == f"<!-- {MARKER}-bisect:not-dispatched -->"


def test_untrusted_names_are_escaped_and_ping_nobody():
    series, sd = found(label="drain @someone fixes #12 <img src=x>", runner="cpu: [x](y)")
    body = issue_body(series, sd, sd.change_points[0], server_url="https://github.com",
                      repository="o/r", bisect=None)
    rendered = markdown_check.render(body)
    assert rendered.live_mentions() == [] and rendered.live_refs() == []
    assert "img" not in rendered.tags
    assert all(not href.endswith("y") for href in markdown_check.github_links(body))
    assert "\n" not in issue_title(sd, sd.change_points[0])


def test_a_commit_that_is_not_hex_is_printed_as_unknown():
    assert sha("abc1234") == "abc1234" and sha("main; rm -rf /") == "unknown"
    with pytest.raises(ValueError):
        series_marker("a b")


def test_the_levels_follow_the_segments():
    series, sd = found()
    levels = level_line(series, sd)
    assert len(levels) == 60 and len(set(levels[:40])) == 1 and len(set(levels[40:])) == 1
    assert levels[0] > 220 and levels[-1] < 130
