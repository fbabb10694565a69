"""gate report: rendering, escaping of untrusted text, trimming, chart, CLI."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from support import factories as f
from support import markdown_check
from support.cli import gate_in_process
from support.paths import REPO_ROOT

from gate.judge.verdict import Outcome
from gate.report.chart import chart_series, write_png
from gate.report.escape import ZWJ, code_block, md_inline
from gate.report.render import (
    GITHUB_COMMENT_LIMIT,
    ReportInput,
    comment_marker,
    render_comment,
    render_report,
)
from gate.report.view import RunInput

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NASTY = "\n".join([
    "+s = '''",
    "+```",
    "+</details><img src=x onerror=alert(1)>",
    "+@someone please look, fixes #123",
    "+````",
    "+~~~",
    "+'''",
])


def render(**kw) -> str:
    head = kw.pop("head", f.sweep_results("head", f.REGRESSED))
    base = kw.pop("base", f.sweep_results("base", f.HEALTHY))
    kw.setdefault("verdict", f.verdict())
    return render_report(ReportInput(head=head, base=base, chart_series=chart_series(head, base),
                                     **kw))


def split_code(md: str) -> tuple[list[str], list[list[str]]]:
    """CommonMark fences: (lines outside code, code blocks). Asserts every fence is closed."""
    outside, blocks, fence = [], [], None
    for line in md.split("\n"):
        if fence is None:
            m = re.match(r"^(`{3,}|~{3,})", line)
            if m:
                fence = m.group(1)
                blocks.append([])
            else:
                outside.append(line)
        elif re.match(rf"^{re.escape(fence[0])}{{{len(fence)},}}\s*$", line):
            fence = None
        else:
            blocks[-1].append(line)
    assert fence is None, "a code block was left open"
    return outside, blocks


def checks_table_lines(md: str) -> list[str]:
    lines = md.split("\n")
    start = lines.index("| Check | Base | Head | Δ | Interval | Threshold | Outcome |")
    end = lines.index("", start)
    return lines[start:end]


def test_first_line_carries_outcome_and_headline():
    for outcome in Outcome:
        md = render(verdict=f.verdict(outcome))
        first = md.split("\n")[0]
        assert outcome.value.upper() in first
        assert "guided drain 48% slower" in first


def test_checks_table_has_every_check():
    v = f.verdict()
    rows = checks_table_lines(render(verdict=v))
    assert len(rows) == 2 + len(v.checks)
    for c, row in zip(v.checks, rows[2:], strict=True):
        assert md_inline(c.label) in row
        assert c.outcome.value in row
    assert "| 233.0 req/min | 121.0 req/min | -48.1% | [-51.1%, -45.1%] | ≥ −10% | ❌ fail |" in rows[2]
    assert "≤ 1.25" in rows[5]


def test_guided_free_table_values():
    md = render()
    assert "| 8 | base (V1) | 15 | 14 | 1.07× | 480.0 | 500.0 |" in md
    assert "| 32 | head (V1) | 150.0 | 45 | **3.33×** ⚠️ | 200.0 | 640.0 |" in md
    assert "| 1 | head (V1) | 5.6 | 5.2 | 1.08× | 170.0 | 185.0 |" in md
    assert "<sub>Tables from the V1 model runner (server log) (both builds)</sub>" in md


def test_guided_free_table_head_only():
    head = f.sweep_results("head", f.HEALTHY)
    md = render_report(ReportInput(verdict=f.verdict(Outcome.PASS, mode="absolute"), head=head))
    assert "| 8 | head (V1) | 15 | 14 | 1.07× | 480.0 | 500.0 |" in md
    assert "| base" not in md


def test_each_table_says_which_model_runner_it_is_from():
    """Builds that ran different runners (an error verdict) are named apart in every table."""
    head = f.sweep_results("head", f.REGRESSED, fp=f.fingerprint(runner="v2"))
    base = f.sweep_results("base", f.HEALTHY)
    md = render(head=head, base=base, verdict=f.verdict(Outcome.ERROR))
    assert "| 8 | base (V1) | 15 | 14 |" in md and "| 8 | head (V2) | 30 | 14 |" in md
    assert ("Tables from: base: V1 model runner (server log); head: V2 model runner "
            "(server log)") in md
    assert "| Model runner | V1 model runner (server log) | V2 model runner (server log) |" in md
    unread = f.sweep_results("head", f.HEALTHY, fp=f.fingerprint(runner=None))
    alone = render_report(ReportInput(verdict=f.verdict(Outcome.PASS, mode="absolute"),
                                      head=unread))
    assert "| 8 | head | 15 |" in alone
    assert "Tables from the model runner not read (vLLM chose at start-up)" in alone


def test_hunk_cannot_escape_its_block_or_ping():
    hs = f.hunkset([f.hunk("vllm/v1/sample/@evil <b>x</b>.py", NASTY, section="def f(): # @bob"),
                    f.hunk()])
    md = render(hunks=hs)
    outside, blocks = split_code(md)
    nasty_block = next(b for b in blocks if "+</details><img src=x onerror=alert(1)>" in b)
    assert "+@someone please look, fixes #123" in nasty_block
    assert nasty_block == NASTY.split("\n")
    text = "\n".join(outside)
    assert not re.search(r"@(?!\u200d)\w", text), "an @mention outside code"
    assert not re.search(r"#(?!\u200d)\d", text), "an issue ref outside code"
    assert "<img" not in text and "<b>x</b>" not in text
    assert text.count("<details") == text.count("</details>")
    assert "&lt;b&gt;x&lt;/b&gt;" in text and f"@{ZWJ}evil" in text
    assert md.split("\n")[0].startswith("### ❌ FAIL")


def test_untrusted_errors_and_headline_are_escaped():
    v = f.verdict(headline="boom @team see #9 <script>", errors=["| x | <b>y</b> @a\n# z"])
    head = f.sweep_results("head", f.REGRESSED, errors=["server said @root ```"])
    md = render(verdict=v, head=head)
    outside, _ = split_code(md)
    text = "\n".join(outside)
    assert "<script>" not in text and "<b>y</b>" not in text
    assert not re.search(r"@(?!\u200d)\w", text)
    assert "\\| x \\|" in text  # pipes cannot split a table or list item
    assert not any(line.startswith("# z") for line in outside)


def test_code_block_fence_is_longer_than_any_backtick_run():
    body = "+a ```` b\n+`````"
    block = code_block(body, "diff")
    assert block.startswith("``````diff\n") and block.endswith("\n``````")


def test_huge_hunk_set_is_trimmed_from_the_end():
    hunks = [f.hunk(f"vllm/v1/sample/m{i}.py", "\n".join(f"+line {j} of {i}" for j in range(60)))
             for i in range(400)]
    hunks[0] = f.hunk("vllm/v1/structured_output/utils.py", "+x = torch.full(3, pin_memory=True)",
                      mechanisms=["pin_memory", "full_staging"], score=12.0)
    full = render(hunks=f.hunkset(hunks), max_chars=10**9)
    md = render(hunks=f.hunkset(hunks), max_chars=65536)
    assert len(full) > 65536 >= len(md)
    assert md.split("\n")[0] == full.split("\n")[0]
    assert checks_table_lines(md) == checks_table_lines(full)
    assert "were left out" in md and "of 400 hunk(s)" in md
    assert "structured_output/utils.py" in md  # the ranked hunk survives
    assert "m399.py" not in md
    split_code(md)


def test_one_giant_hunk_is_truncated_with_a_note():
    giant = f.hunk("vllm/v1/sample/big.py", "\n".join(f"+x{j} = {j}" for j in range(20000)))
    md = render(hunks=f.hunkset([giant]), max_chars=20000)
    assert len(md) <= 20000
    assert "more line(s) of this hunk left out" in md and "1 long hunk body(ies) truncated" in md
    split_code(md)


def test_long_errors_and_many_checks_stay_within_limit():
    v = f.verdict(errors=[f"error {i}: " + "x" * 2000 for i in range(100)])
    hunks = [f.hunk(f"vllm/v1/sample/m{i}.py", "+y" * 500) for i in range(50)]
    md = render(verdict=v, hunks=f.hunkset(hunks), max_chars=8000)
    assert len(md) <= 8000
    assert md.startswith("### ❌ FAIL")
    assert len(checks_table_lines(md)) == 2 + len(v.checks)


def test_environment_warning_for_oversubscribed_threads():
    head = f.sweep_results("head", f.REGRESSED, fp=f.fingerprint(torch_threads=172, quota=12.0, cores=172))
    md = render(head=head)
    section = md.split("#### ⚠️ Environment warnings", 1)[1]
    assert "torch uses 172 threads but the CPU quota is 12 CPUs" in section
    assert "Set OMP_NUM_THREADS=12" in section


def test_no_environment_section_when_healthy():
    assert "Environment warnings" not in render()


def test_hunks_section_ranked_first_with_tags():
    hs = f.hunkset([
        f.hunk("vllm/v1/structured_output/utils.py", "+p = torch.full(3, pin_memory=True)",
               mechanisms=["pin_memory", "full_staging"], score=12.0, section="def apply_grammar_bitmask("),
        f.hunk("vllm/v1/sample/x.bin", "", change="binary", new_lines=0, old_lines=0),
        f.hunk("vllm/v1/sample/new.py", "", change="renamed", old_path="vllm/v1/sample/old.py"),
    ])
    md = render(hunks=hs)
    hunk_part = md.split("#### Changes in watched paths", 1)[1]
    first = hunk_part.index("structured_output/utils.py")
    assert first < hunk_part.index("x.bin") < hunk_part.index("new.py")
    assert "<b>pin_memory, full_staging</b>" in hunk_part
    assert "<details open><summary>🔥" in hunk_part
    assert "binary file: no text diff" in hunk_part
    assert "renamed from <code>vllm/v1/sample/old.py</code>" in hunk_part


def test_empty_hunk_set_says_so():
    assert "No changes in the watched paths." in render(hunks=f.hunkset([]))


def test_mermaid_chart_and_run_info():
    md = render()
    assert "xychart-beta" in md and 'x-axis "concurrency" ["1", "8", "32"]' in md
    assert "line [170.0, 240.0, 200.0]" in md
    assert "<summary>Run info</summary>" in md and "abcdef0123456789" in md
    assert "server\\_start 53 s" in md or "server_start 53 s" in md


def test_png_is_written_and_valid(tmp_path: Path):
    head, base = f.sweep_results("head", f.REGRESSED), f.sweep_results("base", f.HEALTHY)
    out = tmp_path / "charts" / "chart.png"
    assert write_png(out, chart_series(head, base)) is None
    assert out.read_bytes()[:8] == PNG_MAGIC and out.stat().st_size > 5000


def test_png_skipped_gracefully_without_matplotlib(tmp_path: Path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    series = chart_series(f.sweep_results(), None)
    note = write_png(tmp_path / "c.png", series)
    assert note and "matplotlib is not installed" in note
    assert not (tmp_path / "c.png").exists()
    md = render_report(ReportInput(verdict=f.verdict(), head=f.sweep_results(), chart_series=series,
                                   chart_name="c.png", chart_note=note))
    assert "matplotlib is not installed" in md


def test_report_command_writes_the_markdown_and_a_png_chart(tmp_path: Path):
    paths = {name: tmp_path / f"{name}.json" for name in ("verdict", "head", "base", "hunks")}
    paths["verdict"].write_text(f.verdict().model_dump_json())
    paths["head"].write_text(f.results_json(f.sweep_results("head", f.REGRESSED)))
    paths["base"].write_text(f.results_json(f.sweep_results("base", f.HEALTHY)))
    paths["hunks"].write_text(f.hunkset([f.hunk(text=NASTY)]).model_dump_json())
    out, chart = tmp_path / "report.md", tmp_path / "chart.png"
    proc = gate_in_process("report", "--verdict", paths["verdict"], "--head", paths["head"],
                           "--base", paths["base"], "--hunks", paths["hunks"], "--out", out,
                           "--chart", chart, "--title", "My gate")
    assert proc.returncode == 0, proc.stderr
    md = out.read_text()
    assert md.startswith("### ❌ FAIL") and "**My gate**" in md
    assert chart.read_bytes()[:8] == PNG_MAGIC
    assert "PNG chart: chart.png" in md


def test_cli_missing_file_is_gate_error(tmp_path: Path):
    proc = gate_in_process("report", "--verdict", tmp_path / "nope.json", "--head", tmp_path)
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr and "Traceback" not in proc.stderr


# ---- one template, escaping, fitting by sections (the comment) --------------------------------

TEMPLATE = REPO_ROOT / "gate" / "report" / "templates" / "comment.md.j2"
FIVE_TICKS = "\n".join([
    "+s = '''",
    "+`````",
    "+@octocat please merge <img src=x onerror=alert(1)> fixes #12",
    "+`````",
    "+https://github.com/vllm-project/vllm/issues/49013",
    "+'''",
])


def test_the_layout_is_one_jinja_template_without_unescaped_joins():
    """One template for the comment, one for gate bisect's report (gate.report.bisect) and one
    for the history dashboard (gate.report.dashboard, HTML-autoescaped)."""
    templates = sorted(p.name for p in TEMPLATE.parent.iterdir())
    assert templates == ["bisect.md.j2", "comment.md.j2", "dashboard.html.j2"]
    for name in templates:
        text = (TEMPLATE.parent / name).read_text()
        code = re.sub(r"\{#.*?#\}", "", text, flags=re.S)  # comments may name them
        for construct in ("~", "join", "format", "safe", "$"):
            assert construct not in code, (name, construct)


def rows_are_whole(md: str) -> None:
    """Nothing cut mid-line: every table row is closed, every fence closed."""
    outside, _ = split_code(md)
    for line in outside:
        if line.startswith("|"):
            assert line.rstrip().endswith("|"), line


def oversized_comment(budget: int = GITHUB_COMMENT_LIMIT, **kw) -> str:
    hunks = [f.hunk(f"vllm/v1/sample/m{i}.py", "\n".join(f"+line {j} of {i}" for j in range(80)))
             for i in range(300)]
    for i in (0, 150, 299):  # first, middle, last
        hunks[i] = f.hunk(f"vllm/v1/sample/evil{i}.py", FIVE_TICKS + "\n" + "+pad\n" * 3000)
    head, base = f.sweep_results("head", f.REGRESSED), f.sweep_results("base", f.HEALTHY)
    run = RunInput(verdict=f.verdict(**kw), head=head, base=base, hunks=f.hunkset(hunks),
                   chart_series=chart_series(head, base))
    return render_comment([run], "default", "https://github.com/o/r/actions/runs/1", budget)


def test_oversized_comment_fits_whole_and_shows_nothing_live():
    md = oversized_comment()
    assert len(md) <= GITHUB_COMMENT_LIMIT
    assert md.startswith(comment_marker("default") + "\n")
    assert md.rstrip().endswith("<sub>[gate run](https://github.com/o/r/actions/runs/1)</sub>")
    assert "``````diff" in md  # the 5-backtick hunk got a longer fence
    assert "of 300 hunk(s) were left out" in md
    rows_are_whole(md)
    shown = markdown_check.render(md)
    assert "img" not in shown.tags and set(shown.tags) <= markdown_check.OWN_TAGS
    assert shown.live_mentions() == [] and shown.live_refs() == []
    assert "issues/49013" not in shown.outside
    assert any("@octocat please merge <img" in c for c in shown.code)


@pytest.mark.parametrize("budget", [8000, 20_000, 65_536])
def test_comment_budget_covers_tags_and_footer(budget):
    md = oversized_comment(budget)
    assert budget - 2000 < len(md) <= budget  # filled with whole hunks (one is ~1,400), never over
    rows_are_whole(md)


def test_sections_go_whole_when_even_without_hunks_it_is_too_long():
    md = oversized_comment(8000, errors=[f"error {i}: " + "x" * 550 for i in range(20)],
                           advice=[f"advice {i}: " + "y" * 550 for i in range(20)])
    assert len(md) <= 8000
    assert "<summary>Run info</summary>" not in md and "xychart-beta" not in md
    assert "| Check | Base | Head |" in md  # the checks table stays
    rows_are_whole(md)


def test_a_huge_checks_table_shrinks_to_the_failing_checks_then_a_count():
    checks = [f.check(f"c{i}", f"check {i}", 1.0, 1.0) for i in range(400)]
    failing = f.check("bad", "the failing one", 1.0, 2.0, Outcome.FAIL)
    md = render(verdict=f.verdict(checks=[failing, *checks]), max_chars=20_000)
    assert len(md) <= 20_000
    assert "the failing one" in md and "check 7 " not in md
    assert "400 passing check(s) not shown" in md
    md = render(verdict=f.verdict(checks=[failing] * 300 + checks), max_chars=6000)
    assert "700 check(s), 300 not passing: the table is left out" in md


def test_bidi_controls_and_issue_urls_are_neutralised_everywhere():
    trojan = '+if access_level != "user\u202e \u2066// Check if admin\u2069 \u2066":'
    hs = f.hunkset([f.hunk("vllm/v1/sample/a\u202eb.py",
                           trojan + "\n+see https://github.com/o/r/pull/7")])
    v = f.verdict(headline="see https://github.com/o/r/issues/1 and \u202egnp.exe \u200f\u061c")
    md = render(verdict=v, hunks=hs)
    for ch in "\u202e\u2066\u2069\u200e\u200f\u061c":
        assert ch not in md
    assert "<U+202E>" in md and "&lt;U+202E&gt;" in md  # in code as is, in text escaped
    assert f"issues/{ZWJ}1" in md and f"pull/{ZWJ}7" in md
    shown = markdown_check.render(md)
    assert "issues/1" not in shown.outside and "pull/7" not in "".join(shown.code)


def test_without_results_the_report_shows_the_verdict_alone():
    v = f.verdict(Outcome.ERROR, headline="no verdict (measurement exit 4)", checks=[],
                  errors=["the server died"])
    md = render_report(ReportInput(verdict=v, hunks=f.hunkset([f.hunk()])))
    assert md.startswith("### 💥 ERROR: no verdict (measurement exit 4)")
    assert "_No readable results: this report shows the verdict alone" in md
    assert "- the server died" in md and "#### Changes in watched paths" in md
    assert "Guided vs free" not in md and "Run info" not in md


def test_cli_renders_the_short_report_without_head(tmp_path: Path):
    verdict = tmp_path / "verdict.json"
    verdict.write_text(f.verdict(Outcome.ERROR, checks=[]).model_dump_json())
    out = tmp_path / "report.md"
    assert gate_in_process("report", "--verdict", verdict, "--out", out).returncode == 0
    assert out.read_text().startswith("### 💥 ERROR")


def test_a_matrix_comment_fits_by_sections_across_its_runs():
    head = f.sweep_results("head", f.REGRESSED, errors=[f"e{i} " + "z" * 590 for i in range(20)])
    runs = [RunInput(verdict=f.verdict(headline=f"runner {i} verdict",
                                       advice=[f"a{j} " + "w" * 590 for j in range(20)]),
                     head=head, base=f.sweep_results("base", f.HEALTHY), label=f"gpu{i}",
                     hunks=f.hunkset([f.hunk(f"vllm/v1/sample/m{j}.py", "+x\n" * 200)
                                      for j in range(50)]))
             for i in range(12)]
    md = render_comment(runs, "matrix")
    assert len(md) <= GITHUB_COMMENT_LIMIT
    for i in range(12):
        assert f"### gpu{i}\n" in md and f"FAIL: runner {i} verdict" in md
    assert "<summary>Run info</summary>" not in md  # the first sections to go, in every run
    rows_are_whole(md)
