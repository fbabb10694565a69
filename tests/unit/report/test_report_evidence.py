"""The report with a profile diff: where the head spends more time, and the hunks ranked by
that measured time rather than by patterns."""

from __future__ import annotations

from support import factories as f
from support.profiles import make_profile, steady

from gate.evidence.attribution import Evidence, RankedHunk, apply_evidence
from gate.judge.verdict import Outcome
from gate.profile.diff import diff_profiles
from gate.report.render import ReportInput, render_report

PATTERNS = f.hunk("vllm/v1/worker/gpu_model_runner.py",
                  "-x = np.full(3, -1)\n+x = torch.full((3,), -1).pin_memory()",
                  mechanisms=["pin_memory", "full_staging"], score=12.0, new_start=40)
SLOWED = f.hunk("vllm/v1/structured_output/utils.py", "-a = 1\n+a = slow()", new_start=128)


def evidence() -> Evidence:
    return Evidence(hunks=[
        RankedHunk(rank=1, index=1, path=SLOWED.path, new_start=128, tier="self",
                   added_ms=600.0, evidence="+600 ms per 1k output tokens in "
                   "apply_grammar_bitmask, vllm/v1/structured_output/utils.py:128-198"),
        RankedHunk(rank=2, index=0, path=PATTERNS.path, new_start=40, score=12.0)])


def test_evidence_reorders_the_hunks_and_labels_them():
    ranked = apply_evidence(f.hunkset([PATTERNS, SLOWED]), evidence())
    assert [h.path for h in ranked.hunks] == [SLOWED.path, PATTERNS.path]
    assert ranked.hunks[0].evidence.startswith("+600 ms") and ranked.hunks[1].evidence is None


def test_report_shows_where_the_time_went_and_ranks_the_measured_hunk_first():
    diff = diff_profiles(make_profile("base", steady(20)), make_profile("head", steady(80)))
    md = render_report(ReportInput(verdict=f.verdict(Outcome.FAIL), head=f.sweep_results(),
                                   hunks=f.hunkset([PATTERNS, SLOWED]), profile_diff=diff,
                                   evidence=evidence()))
    assert "#### Where the head spends more time" in md
    first = md.index("vllm/v1/structured_output/utils.py</code>")
    assert first < md.index("vllm/v1/worker/gpu_model_runner.py</code>")
    assert "⏱️ <b>+600 ms per 1k output tokens in apply_grammar_bitmask" in md


def test_without_a_profile_the_patterns_rank_the_hunks():
    md = render_report(ReportInput(verdict=f.verdict(Outcome.FAIL), head=f.sweep_results(),
                                   hunks=f.hunkset([PATTERNS, SLOWED])))
    assert "Where the head spends more time" not in md and "⏱️" not in md
