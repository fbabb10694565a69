"""A patch that keeps only some hunks (gate.evidence.hunk_patch.select_hunks): the header
stays, the chosen hunks stay whole with their own line numbers, the others go."""

from __future__ import annotations

from support.factories import hunk

from gate.evidence.hunk_patch import select_hunks

PATCH = """diff --git a/vllm/x.py b/vllm/x.py
index 1111111..2222222 100644
--- a/vllm/x.py
+++ b/vllm/x.py
@@ -1,3 +1,3 @@ def a():
 a = 1
-b = 2
+b = 3
 c = 4
@@ -20,3 +20,4 @@ def b():
 x = 1
+y = 2
 z = 3
 w = 4
@@ -40,2 +41,2 @@ def c():
-q = 1
+q = 2
 r = 3
"""


def test_only_the_chosen_hunks_are_kept_with_the_header():
    kept = select_hunks(PATCH, [hunk("vllm/x.py", old_start=20, new_start=20)])
    assert kept.startswith("diff --git a/vllm/x.py b/vllm/x.py\nindex")
    assert "+++ b/vllm/x.py\n@@ -20,3 +20,4 @@ def b():\n x = 1\n+y = 2\n z = 3\n w = 4\n" in kept
    assert "b = 3" not in kept and "q = 2" not in kept


def test_hunks_are_matched_by_both_start_lines():
    kept = select_hunks(PATCH, [hunk("vllm/x.py", old_start=1, new_start=1),
                                hunk("vllm/x.py", old_start=40, new_start=41),
                                hunk("vllm/x.py", old_start=20, new_start=99)])
    assert kept.count("@@ -") == 2 and "+q = 2" in kept and "+y = 2" not in kept


def test_no_hunk_chosen_leaves_the_header_alone():
    assert select_hunks(PATCH, []).rstrip().endswith("+++ b/vllm/x.py")
