"""gate.evidence.attribution: function spans, changed lines, and hunks ranked by a hand-made profile
diff against a real git repository."""

from __future__ import annotations

import pytest
from support.gitrepo import git

from gate.evidence.attribution import (
    changed_lines,
    function_spans,
    innermost,
    rank_hunks_by_evidence,
)
from gate.evidence.hunks import Hunk, extract_hunks
from gate.profile.diff_file import Change, DiffSettings, FunctionDiff, ProfileDiff

SOURCE = '''\
import functools


def plain():
    return 1


class Runner:
    @functools.cache
    def method(self):
        def inner():
            return 2
        return inner()

    async def run(self):
        return 3


if True:
    def under_if():
        return 4
try:
    pass
except ImportError:
    def in_handler():
        return 5
'''


def test_function_spans_use_the_interpreters_qualified_names():
    spans = {s.name: (s.start, s.end) for s in function_spans(SOURCE)}
    assert spans == {
        "plain": (4, 5),
        "Runner.method": (9, 13),  # the decorator line belongs to it
        "Runner.method.<locals>.inner": (11, 12),
        "Runner.run": (15, 16),
        "under_if": (20, 21),
        "in_handler": (25, 26),
    }


def test_innermost_picks_the_nested_function():
    spans = function_spans(SOURCE)
    assert innermost(spans, 12).name == "Runner.method.<locals>.inner"
    assert innermost(spans, 13).name == "Runner.method"
    assert innermost(spans, 1) is None


def test_changed_lines_count_both_sides():
    hunk = Hunk(path="a.py", old_start=10, old_lines=4, new_start=20, new_lines=5,
                text=" ctx\n-old one\n+new one\n+new two\n ctx\n\\ No newline at end of file")
    assert changed_lines(hunk) == ([21, 22], [11])


def change(diff: float = 0.0, significant: bool = False, base: float = 100.0) -> Change:
    return Change(base=base, head=base + diff, diff=diff, low=diff / 2 if significant else None,
                  high=diff * 2 if significant else None, significant=significant)


def fdiff(file: str, name: str, self_diff: float = 0.0, self_sig: bool = False,
          incl_diff: float = 0.0, incl_sig: bool = False) -> FunctionDiff:
    return FunctionDiff(file=file, name=name, line=1, self_time=change(self_diff, self_sig),
                        inclusive=change(incl_diff, incl_sig))


def profile_diff(*functions: FunctionDiff) -> ProfileDiff:
    return ProfileDiff(base_label="base", head_label="head", base_windows=5, head_windows=5,
                       base_tokens=1e4, head_tokens=1e4, total=change(), waiting=change(), settings=DiffSettings(),
                       method="test", functions=list(functions))




BASE = '''\
def caller(x):
    y = x + 1
    return callee(y)


PAD_A = 1
PAD_B = 2
PAD_C = 3
PAD_D = 4
PAD_E = 5
PAD_F = 6
PAD_G = 7


def callee(y):
    total = y * 2
    return total


PAD_H = 1
PAD_I = 2
PAD_J = 3
PAD_K = 4
PAD_L = 5
PAD_M = 6
PAD_N = 7


def stager(n):
    buf = [0] * n
    return buf


PAD_O = 1
PAD_P = 2
PAD_Q = 3
PAD_R = 4
PAD_S = 5
PAD_T = 6
PAD_U = 7


def removed_later():
    return "gone"
'''


@pytest.fixture
def pr_repo(tmp_path):
    """A PR that edits caller, callee and stager, and deletes a line of removed_later."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    path = repo / "pkg" / "utils.py"
    path.write_text(BASE)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "branch", "base")
    head = (BASE.replace("    y = x + 1\n", "    y = x + 2\n")
            .replace("    total = y * 2\n", "    total = y * 3\n")
            .replace("    buf = [0] * n\n", "    buf = torch.full((n,), 0, pin_memory=True)\n")
            .replace('def removed_later():\n    return "gone"\n', "def removed_later():\n    pass\n"))
    path.write_text(head)
    git(repo, "commit", "-q", "-am", "head")
    return repo, extract_hunks(repo, "base", "HEAD", ["pkg/**"])


def by_function(evidence) -> dict[str, object]:
    return {h.functions[0].name: h for h in evidence.hunks if h.functions}


def test_self_time_outranks_inclusive_time_and_patterns(pr_repo):
    repo, hunkset = pr_repo
    assert hunkset.hunks[0].mechanisms  # stager's pin_memory/torch.full line leads by pattern
    diff = profile_diff(
        fdiff("pkg/utils.py", "callee", self_diff=50, self_sig=True, incl_diff=50, incl_sig=True),
        fdiff("pkg/utils.py", "caller", incl_diff=80, incl_sig=True),
        fdiff("pkg/utils.py", "stager", self_diff=3),
    )
    evidence = rank_hunks_by_evidence(hunkset, diff, repo)
    order = [h.functions[0].name for h in evidence.hunks]
    assert order == ["callee", "caller", "stager", "removed_later"]
    first = evidence.hunks[0]
    assert first.rank == 1 and first.tier == "self" and first.added_ms == 50
    assert first.evidence == "+50 ms per 1k output tokens in callee, pkg/utils.py:15-17"
    second = evidence.hunks[1]
    assert second.tier == "inclusive" and "(inclusive: in it or what it calls)" in second.evidence
    assert evidence.hunks[2].tier == "none" and evidence.hunks[2].evidence is None
    assert evidence.untouched == []


def test_without_evidence_the_pattern_order_stays(pr_repo):
    repo, hunkset = pr_repo
    evidence = rank_hunks_by_evidence(hunkset, profile_diff(), repo)
    assert [h.index for h in evidence.hunks] == list(range(len(hunkset.hunks)))
    assert all(h.tier == "none" for h in evidence.hunks)


def test_deleted_lines_are_matched_in_the_base_file(pr_repo):
    repo, hunkset = pr_repo
    diff = profile_diff(fdiff("pkg/utils.py", "removed_later", self_diff=20, self_sig=True))
    evidence = rank_hunks_by_evidence(hunkset, diff, repo)
    assert evidence.hunks[0].functions[0].name == "removed_later"
    assert evidence.hunks[0].tier == "self"


def test_added_time_no_hunk_touches_is_listed(pr_repo):
    repo, hunkset = pr_repo
    diff = profile_diff(
        fdiff("torch/_tensor.py", "Tensor.pin_memory", self_diff=30, self_sig=True),
        fdiff("pkg/utils.py", "stager", incl_diff=30, incl_sig=True),
        fdiff("other/mod.py", "busy_loop", incl_diff=30, incl_sig=True),  # a caller: not listed
    )
    evidence = rank_hunks_by_evidence(hunkset, diff, repo)
    assert [f.name for f in evidence.untouched] == ["Tensor.pin_memory"]
    assert "a dependency or a caller changed" in type(evidence).model_fields["untouched"].description
    assert by_function(evidence)["stager"].tier == "inclusive"


def test_profile_files_match_by_path_suffix_and_comprehensions_count(pr_repo):
    repo, hunkset = pr_repo
    diff = profile_diff(
        fdiff("/abs/src/pkg/utils.py", "callee.<locals>.<listcomp>", self_diff=40, self_sig=True))
    evidence = rank_hunks_by_evidence(hunkset, diff, repo)
    assert evidence.hunks[0].functions[0].name == "callee"
    assert evidence.hunks[0].tier == "self" and evidence.untouched == []


def test_unparsable_files_are_noted_not_fatal(tmp_path):
    repo = tmp_path / "r"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "bad.py").write_text("x = 1\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    (repo / "pkg" / "bad.py").write_text("def broken(:\n")
    git(repo, "commit", "-q", "-am", "head")
    hunkset = extract_hunks(repo, "HEAD~1", "HEAD", ["pkg/**"])
    evidence = rank_hunks_by_evidence(hunkset, profile_diff(), repo)
    assert len(evidence.hunks) == 1 and evidence.hunks[0].functions == []
    assert any("does not parse" in n for n in evidence.notes)

