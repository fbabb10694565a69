"""gate.plan.hot_paths: the watch globs and the default hot paths."""

from __future__ import annotations

from gate.evidence.hunks import DEFAULT_WATCH
from gate.plan.hot_paths import WATCHED_PATHS, glob_to_regex, watched


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


def test_the_hot_paths_are_the_default_watch_list_and_name_the_seeds_file():
    assert DEFAULT_WATCH == WATCHED_PATHS
    assert watched("vllm/v1/structured_output/utils.py", WATCHED_PATHS)
    assert not watched("vllm/entrypoints/openai/api_server.py", WATCHED_PATHS)
