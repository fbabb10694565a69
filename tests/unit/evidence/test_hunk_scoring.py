"""gate.evidence.hunks' pure parts: watch globs and the score of a hunk's changed lines
(integration/test_hunks.py extracts hunks from real git repositories)."""

from __future__ import annotations

from gate.evidence.hunks import DEFAULT_WATCH, glob_to_regex, score_hunk


def test_watch_globs_star_stays_in_a_folder_double_star_spans_folders():
    assert glob_to_regex("vllm/v1/sample/**").match("vllm/v1/sample/a/b.py")
    assert not glob_to_regex("vllm/v1/sample/**").match("vllm/v1/sampler.py")
    assert glob_to_regex("vllm/*.py").match("vllm/a.py")
    assert not glob_to_regex("vllm/*.py").match("vllm/x/a.py")
    assert glob_to_regex("**/utils.py").match("utils.py")
    assert glob_to_regex("**/utils.py").match("a/b/utils.py")
    assert glob_to_regex("vllm/v1/sample").match("vllm/v1/sample/x.py")
    assert glob_to_regex("requirements/common.txt").match("requirements/common.txt")
    assert not glob_to_regex("requirements/common.txt").match("requirements/common.txt.bak")
    assert "vllm/v1/structured_output/**" in DEFAULT_WATCH


def test_score_counts_changed_lines_only():
    assert score_hunk("a.py", "", " x = pin_memory\n+y = 1") == ([], 0.0)
    tags, score = score_hunk("a.py", "", "-x = np.full(3, -1)\n+x = 1")
    assert tags == ["full_staging"] and 4 < score < 4.1
