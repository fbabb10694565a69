"""gate.evidence.hunks' pure parts: the score of a hunk's changed lines
(integration/test_hunks.py extracts hunks from real git repositories)."""

from __future__ import annotations

from gate.evidence.hunks import score_hunk


def test_score_counts_changed_lines_only():
    assert score_hunk("a.py", "", " x = pin_memory\n+y = 1") == ([], 0.0)
    tags, score = score_hunk("a.py", "", "-x = np.full(3, -1)\n+x = 1")
    assert tags == ["full_staging"] and 4 < score < 4.1
