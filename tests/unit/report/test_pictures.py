"""The pictures that render anywhere markdown does (gate.report.pictures), and where the
comment shows them: the interval against the threshold, the history on main, the sequential
test look by look, and an acknowledged check."""

from __future__ import annotations

from support import factories as f
from support import markdown_check

from gate.judge.trajectory import Look, Trajectory
from gate.judge.verdict import Acknowledged, Outcome
from gate.report.pictures import interval_bar, mermaid_looks, mermaid_series, sparkline
from gate.report.render import ReportInput, render_report


def bar(delta, lo, hi, direction="lower_is_better", threshold=10.0):
    c = f.check("x.y", "X", 100.0, 100.0 + delta, direction=direction, threshold=threshold)
    return str(interval_bar(c.model_copy(update={"ci_low_pct": lo, "ci_high_pct": hi})))


def test_the_bar_puts_worse_to_the_right_whatever_the_direction():
    slower = bar(8.0, 5.0, 11.0)
    faster = bar(-8.0, -11.0, -5.0)
    assert slower.index("■") > slower.index("│") and faster.index("■") < faster.index("│")
    # a throughput drop is worse: to the right, like a latency rise
    drop = bar(-8.0, -11.0, -5.0, direction="higher_is_better")
    assert drop == slower


def test_the_bar_shows_whether_the_interval_clears_the_threshold():
    inside = bar(2.0, -1.0, 5.0)
    past = bar(15.0, 12.0, 18.0)
    assert inside.index("┆") > inside.rindex("─")  # the whole interval short of it
    assert past.index("┆") < past.index("─")  # the whole interval past it
    assert bar(300.0, 250.0, 350.0).endswith("▸`")  # beyond the scale: an arrow
    assert inside.startswith("`") and inside.endswith("`") and len(inside) == 25


def test_no_bar_without_an_interval_or_for_an_absolute_check():
    v = f.verdict()
    absolute = next(c for c in v.checks if c.kind == "absolute")
    assert interval_bar(absolute) == "–"
    bare = v.checks[0].model_copy(update={"ci_low_pct": None})
    assert interval_bar(bare) == "–"


def test_sparkline_scales_the_series_onto_eight_blocks():
    assert sparkline([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]) == "▁▂▃▄▅▆▇█"
    assert sparkline([5.0, 5.0]) == "▁▁" and sparkline([]) == ""
    assert sparkline([1.0, float("nan"), 2.0]) == "▁ █"


def test_mermaid_charts_are_fenced_and_carry_every_value():
    chart = str(mermaid_series([233.0, 231.0, 121.0], [232.0, 232.0, 121.0], title='a "q"',
                               y_label="req/min"))
    assert chart.startswith("```mermaid\n%%{init:") and "\nxychart-beta\n" in chart
    assert chart.endswith("```")
    assert "line [233, 231, 121]" in chart and "line [232, 232, 121]" in chart
    assert 'title "a \'q\'"' in chart and "x-axis \"night\" 1 --> 3" in chart
    looks = str(mermaid_looks([-5.0, -12.0, -15.0], [2, 4, 6], threshold=-10.0, title="change"))
    assert 'x-axis ["r2", "r4", "r6"]' in looks and "line [-10, -10, -10]" in looks
    assert "line [0, 0, 0]" in looks


def report(verdict, **kw):
    head = f.sweep_results("head", f.REGRESSED)
    return render_report(ReportInput(verdict=verdict, head=head, **kw))


def test_the_comment_shows_the_bars_and_the_history_on_main():
    v = f.verdict()
    md = report(v, history={"drain.req_per_min": [233.0, 232.0, 234.0, 121.0]})
    assert "| At a glance | Against the threshold | Main, nightly |" in md
    assert "▇▇█▁" in md or "███▁" in md
    without = report(v)
    assert "| At a glance | Against the threshold |\n" in without  # no history column
    assert "Main, nightly" not in without


def test_the_comment_says_why_the_sequential_test_stopped():
    looks = [Look(round=2, delta_pct=-45.0, low_pct=-60.0, high_pct=-20.0,
                  outcome=Outcome.INCONCLUSIVE),
             Look(round=4, delta_pct=-47.0, low_pct=-55.0, high_pct=-38.0, outcome=Outcome.FAIL)]
    t = Trajectory(check="drain.req_per_min", label="drain req/min (guided)", looks=looks,
                   threshold_pct=-10.0, max_rounds=8)
    md = report(f.verdict(), trajectories=[t])
    assert "<summary>The sequential test, look by look</summary>" in md
    assert ("drain req/min (guided): failed at round 4: -47.0% (-55.0% to -38.0%), past the "
            "threshold -10%") in md
    assert 'x-axis ["r2", "r4"]' in md


def test_an_acknowledged_check_reads_neutral_with_who_and_why():
    v = f.verdict()
    checks = [c.model_copy(update={"acknowledged": Acknowledged(
        login="maintainer", reason="@someone fixes #123 on purpose", head_sha="a" * 40)})
        if c.name == "drain.req_per_min" else c for c in v.checks]
    md = report(v.model_copy(update={"checks": checks}))
    row = next(line for line in md.split("\n") if line.startswith("| Drain req/min"))
    assert "➖ neutral: acknowledged fail" in row
    assert "slowdown acknowledged by maintainer:" in md
    rendered = markdown_check.render(md)
    assert rendered.live_mentions() == [] and rendered.live_refs() == []
