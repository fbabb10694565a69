"""The bisect report (gate.report.bisect): what it says, and that commit subjects, skip
reasons and hunk bodies (untrusted: anyone's commit) cannot break out of their place."""

from __future__ import annotations

from support import markdown_check
from support.factories import hunk, hunkset

from gate.evidence.bisect_record import (
    BisectOutcome,
    BisectResult,
    CommitInfo,
    HunksOutcome,
    HunksResult,
    HunkTest,
    StepRecord,
)
from gate.evidence.bisection import Effect, StepVerdict
from gate.judge.verdict import Outcome
from gate.report.bisect import render_bisect, render_hunks, terminal_bisect, terminal_hunks

EVIL = "@mallory fix #12 </details><img src=x onerror=alert(1)> ``` | cell"
OWN_TAGS = markdown_check.OWN_TAGS | {"h2", "ol"}  # the bisect report's title, hunk list
GOOD, BAD, CULPRIT, BROKEN = "a" * 40, "b" * 40, "c" * 40, "d" * 40


def effect(delta: float) -> Effect:
    return Effect(check="drain.output_tok_s", label="drain output tok/s (guided)",
                  delta_pct=delta, ci_low_pct=delta - 6, ci_high_pct=delta + 6, threshold=10)


def found() -> BisectResult:
    steps = [
        StepRecord(number=1, commit=BAD, role="endpoints", verdict=StepVerdict.BAD,
                   outcome=Outcome.FAIL, effect=effect(-45.2), rounds=2, attempts=1,
                   seconds=300, build="overlay of 2 package file(s)"),
        StepRecord(number=2, commit=BROKEN, verdict=StepVerdict.SKIPPED, seconds=12,
                   reason=f"vllm.x does not import: SyntaxError {EVIL}"),
        StepRecord(number=3, commit=CULPRIT, verdict=StepVerdict.BAD, outcome=Outcome.FAIL,
                   effect=effect(-44.0), rounds=1, attempts=1, seconds=240),
    ]
    body = "+    SLOW_MS = 5\n+```\n+</details>\n+@mallory \u202e"
    return BisectResult(
        outcome=BisectOutcome.FOUND, headline=f"FOUND: the first bad commit is ccc {EVIL}",
        repo="/src/vllm", good=CommitInfo(sha=GOOD, subject="good"),
        bad=CommitInfo(sha=BAD, subject="bad"),
        first_bad=CommitInfo(sha=CULPRIT, subject=EVIL),
        candidates=[CommitInfo(sha=CULPRIT, subject=EVIL)],
        skipped=[CommitInfo(sha=BROKEN, subject="broken")],
        hunks=hunkset([hunk("vllm/v1/structured_output/utils.py", body, new_start=7,
                            evidence="+40 ms per 1k output tokens in apply_grammar_bitmask")]),
        hunks_ranked_by="the profile diff of step 3 (steps/03-ccc/ab1/profile-diff)",
        steps=steps, runner_seconds=900)


def test_the_report_names_the_culprit_its_hunk_and_every_step():
    md = render_bisect(found())
    assert md.startswith("## 🎯 gate bisect: FOUND")
    assert f"<code>{CULPRIT}</code>" in md
    rows = [line for line in md.splitlines() if line.startswith(("| 1 |", "| 2 |", "| 3 |"))]
    assert len(rows) == 3
    assert "-45.2%" in rows[0] and "-51.2% .. -39.2%" in rows[0] and "| 5.0 |" in rows[0]
    assert "skipped" in rows[1] and "| 0.2 |" in rows[1]
    assert "Runner time: 15.0 min in all (9.2 min in steps" in md
    assert "apply_grammar_bitmask" in md and "SLOW_MS = 5" in md


def test_untrusted_text_stays_in_its_place():
    md = render_bisect(found())
    shown = markdown_check.render(md)
    assert set(shown.tags) <= OWN_TAGS and "img" not in shown.tags
    assert shown.live_mentions() == [] and shown.live_refs() == []
    assert shown.tags.count("details") == 1  # the hunk's own; none from the body or subjects
    assert any("</details>" in c for c in shown.code)  # the body's text, inside its code
    table = [line for line in md.splitlines() if line.startswith("| 2 |")][0]
    assert table.count(" | ") == 10  # the reason's `|` did not add a cell


def test_undecided_lists_where_the_first_bad_commit_may_be():
    result = found().model_copy(update={
        "outcome": BisectOutcome.UNDECIDED, "first_bad": None, "hunks": None,
        "headline": "UNDECIDED: the first bad commit is one of 2",
        "candidates": [CommitInfo(sha=BROKEN, subject="broken"),
                       CommitInfo(sha=CULPRIT, subject="slow")]})
    md = render_bisect(result)
    assert "### Where the first bad commit is" in md and "### First bad commit" not in md
    assert md.index(BROKEN) < md.index(f"<code>{CULPRIT}</code> slow")


def test_the_terminal_summary_has_a_row_per_step_and_the_runner_time():
    text = terminal_bisect(found())
    assert text.splitlines()[0].startswith("FOUND")
    assert "runner time: 15.0 min in all" in text
    assert text.count(CULPRIT[:12]) >= 1 and "skipped" in text
    assert "top hunk: vllm/v1/structured_output/utils.py:7" in text


def hunks_result() -> HunksResult:
    hunks = [hunk("vllm/a.py", "+x = 1", new_start=3), hunk("vllm/b.py", f"+{EVIL}"),
             hunk("vllm/v1/structured_output/utils.py", "+    SLOW_MS = 5", new_start=8)]
    tests = [HunkTest(number=1, hunks=[0, 1, 2], reproduces=True, outcome=Outcome.FAIL,
                      effect=effect(-40), rounds=2, attempts=1, seconds=120),
             HunkTest(number=2, hunks=[2], reproduces=True, outcome=Outcome.FAIL,
                      effect=effect(-41), rounds=1, attempts=1, seconds=100),
             HunkTest(number=3, hunks=[0, 1], reproduces=False, seconds=5,
                      reason=f"does not import: {EVIL}")]
    return HunksResult(outcome=HunksOutcome.FOUND, headline="FOUND: 1 of 3 hunk(s)",
                       repo="/r", parent=CommitInfo(sha=GOOD), head=CommitInfo(sha=CULPRIT),
                       hunks=hunks, minimal=[2], tests=tests, runner_seconds=400)


def test_the_hunks_report_shows_the_minimal_set_and_every_configuration():
    md = render_hunks(hunks_result())
    minimal = md.split("### The smallest set")[1].split("### Configurations")[0]
    assert "SLOW_MS = 5" in minimal and "x = 1" not in minimal
    assert "| 2 | 3 | yes |" in md and "| 1 | 1, 2, 3 | yes |" in md
    shown = markdown_check.render(md)
    assert set(shown.tags) <= OWN_TAGS and shown.live_mentions() == []
    text = terminal_hunks(hunks_result())
    assert "3. vllm/v1/structured_output/utils.py:8" in text


def test_the_report_fits_an_issue_comment_by_leaving_hunks_out():
    result = found()
    big = [hunk(f"vllm/f{i}.py", "+x = 1\n" * 600, new_start=i + 1) for i in range(10)]
    result = result.model_copy(update={"hunks": hunkset(big)})
    md = render_bisect(result, limit=20_000)
    assert len(md) <= 20_000
    assert "more hunk(s) in hunks.json" in md and "vllm/f0.py" in md and "vllm/f9.py" not in md
    assert "Runner time:" in md and "| 3 |" in md  # the steps table is kept


def test_a_good_step_shows_its_own_subject():
    """A step that is neither an endpoint, skipped nor the culprit names its commit too: the
    subject travels in its step record."""
    result = found()
    good_step = StepRecord(number=4, commit="d" * 40, subject="commit 3: fix the import",
                           verdict=StepVerdict.GOOD, outcome=Outcome.PASS, rounds=2,
                           attempts=1, seconds=100)
    md = render_bisect(result.model_copy(update={"steps": [*result.steps, good_step]}))
    row = next(line for line in md.splitlines() if line.startswith("| 4 |"))
    assert "commit 3: fix the import" in row
