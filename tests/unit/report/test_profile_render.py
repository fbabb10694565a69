"""The differential flame graph, the folded diff, the report section and the `gate profile`
command's bad-input paths."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from support.profiles import make_profile, steady

from gate.evidence.attribution import Evidence, FunctionEvidence, RankedHunk
from gate.profile.diff import diff_profiles
from gate.profile.diff_file import DiffSettings
from gate.profile.flamegraph import diff_folded_text, folded, render_svg
from gate.report.where_time import TITLE, render_where_time


def test_folded_stacks_are_per_1k_tokens_with_the_process_as_root():
    p = make_profile("b", [{("a.py:main", "a.py:f"): 30}, {("a.py:main", "a.py:f"): 10}],
                     tokens=[1000.0, 1000.0])
    # 40 samples x 10 ms = 400 ms over 2000 tokens = 200 ms per 1k tokens
    assert folded(p) == {"Worker;main (a.py:10);f (a.py:10)": pytest.approx(200.0)}


def test_diff_folded_is_difffolded_output_in_microseconds():
    text = diff_folded_text({"W;a": 1.5, "W;a;b": 0.0004}, {"W;a": 2.0, "W;c": 3.25})
    assert text.splitlines() == ["W;a 1500 2000", "W;c 0 3250"]


def test_svg_is_well_formed_and_colours_the_changed_frame():
    base = folded(make_profile("base", steady(slow=20)))
    head = folded(make_profile("head", steady(slow=80)))
    head["Worker;<evil> & \"name\" (x.py:1)"] = 50.0
    svg = render_svg(base, head, "head vs base <b>")
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    groups = root.findall(f"{ns}g")
    titles = {g.find(f"{ns}title").text.split("\n")[0]: g for g in groups}
    slow = next(g for t, g in titles.items() if t.startswith("apply_grammar_bitmask"))
    fill = slow.find(f"{ns}rect").get("fill")
    assert fill == "rgb(250,60,60)"  # the largest self-time increase: full red
    fast = next(g for t, g in titles.items() if t.startswith("prepare"))
    assert fast.find(f"{ns}rect").get("fill") == "rgb(235,235,250)"  # unchanged: pale
    assert any(t.startswith("<evil> & \"name\"") for t in titles)  # escaped, then parsed back
    widths = {t.split(" ")[0]: float(g.find(f"{ns}rect").get("width")) for t, g in titles.items()}
    assert widths["all"] == pytest.approx(1200.0)


def test_section_without_differences():
    diff = diff_profiles(make_profile("base", steady(40)), make_profile("head", steady(40)))
    text = render_where_time(diff)
    assert text.startswith(TITLE)
    assert "No function takes more time beyond noise (5 + 5 sampling windows" in text
    assert f"at least {DiffSettings().min_share:.0%} of the base's time" in text
    assert "|" not in text


def test_section_lists_self_time_first_and_escapes_names():
    base = steady(slow=20)
    head = steady(slow=80)
    for w in head:  # a function whose name tries markdown and a mention
        w[("app.py:main", "evil.py:x|y @octocat <img>")] = 50
    diff = diff_profiles(make_profile("base", base), make_profile("head", head))
    hunk = RankedHunk(rank=1, index=0, path="lib/utils.py", new_start=128,
                      section="def apply_grammar_bitmask(@someone)", tier="self", added_ms=600,
                      evidence="+600 ms per 1k output tokens in apply_grammar_bitmask, "
                               "lib/utils.py:128-198")
    untouched = FunctionEvidence(name="Tensor.pin_memory", file="torch/_tensor.py",
                                 self_diff=12.0, self_significant=True)
    text = render_where_time(diff, Evidence(hunks=[hunk], untouched=[untouched]), limit=5)
    lines = text.splitlines()
    table = [ln for ln in lines if ln.startswith("| ")][1:]
    assert table[0].startswith("| apply_grammar_bitmask | lib/utils.py:10 | 200.0 | 800.0 |")
    assert "**+600 ms** self" in table[0]
    assert "x\\|y @\u200docto" in text and "&lt;img&gt;" in text and "<img>" not in text
    assert "@\u200dsomeone" in text
    assert any(ln.startswith("1. lib/utils.py:128") and "+600 ms per 1k output tokens" in ln
               for ln in lines)
    assert "no hunk touches (a dependency or a caller changed): Tensor.pin_memory (+12 ms)" \
        in text
    assert len([ln for ln in lines if ln.startswith("| ") and "app.py" in ln]) == 0  # caller


def test_section_keeps_to_the_limit():
    head = steady(slow=80)
    for w in head:
        for i in range(8):
            w[("app.py:main", f"m.py:f{i}")] = 60
    diff = diff_profiles(make_profile("base", steady(slow=20)), make_profile("head", head))
    text = render_where_time(diff, limit=5)
    assert len([ln for ln in text.splitlines() if ln.startswith("| ") and "|--" not in ln]) == 6
    assert "more (callers included) in profile-diff.json" in text
