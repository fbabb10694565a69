"""benchmarks/history_demo.py's logic on stored nights (no vLLM): nights under distinct
commits, detection, chart, dashboard and the baseline it refuses. The real run (7 nights of
`gate run`) is the lead's to run alone; its docstring says how."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import factories as f
from support.paths import REPO_ROOT

from gate.history.replay import nights

SCRIPT = REPO_ROOT / "benchmarks" / "history_demo.py"


def stored(tmp_path, values):
    folder = tmp_path / "stored"
    for i, rpm in enumerate(values, 1):
        f.results_folder(folder / f"night-{i}", f.drain_results(
            [rpm, rpm * 1.01, rpm * 0.99], plan=f.cpu_plan(), fp=f.fingerprint()))
    return folder


def demo(tmp_path, values, *extra):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "out"),
                           "--nights", str(len(values)), "--results-from",
                           str(stored(tmp_path, values)), *extra],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return (tmp_path / "out" / "summary.txt").read_text(), tmp_path / "out"


def test_one_slow_night_is_pending_and_never_promoted(tmp_path):
    values = nights(7, level=233.0, sd=0.03, seed=1, spike_at=6, spike=0.5)
    text, out = demo(tmp_path, values)
    assert "change point:" not in text
    assert "pending: the last 1 night(s)" in text and "latest night regressed: True" in text
    assert "promoted to baseline: no" in text
    assert (out / "drain-chart.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "dashboard.html").is_file() and (out / "history.sqlite").is_file()


def test_a_slowdown_that_stays_is_a_change_point_at_its_first_night(tmp_path):
    values = nights(8, level=233.0, sd=0.02, seed=2, step_at=4, step=0.5)
    text, _ = demo(tmp_path, values, "--slow", "5,6,7,8")
    assert "change point: drain.req_per_min -" in text
    assert "at night 5 " in text and "promoted to baseline: no" in text


def test_too_few_nights_or_a_slow_night_out_of_range_is_refused(tmp_path):
    for argv in (["--nights", "4"], ["--nights", "6", "--slow", "9"]):
        proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "o"),
                               *argv], capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0 and ("at least 6 nights" in proc.stderr
                                         or "outside" in proc.stderr)


@pytest.mark.parametrize("count", [6, 7])
def test_the_nights_have_distinct_commits(count):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import history_demo
    finally:
        sys.path.pop(0)
    planned = history_demo.nights_to_run(count, {count})
    assert len({n.commit for n in planned}) == count and all(len(n.commit) == 40 for n in planned)
    assert [n.slowed for n in planned] == [False] * (count - 1) + [True]
