"""gate.core.git against real repositories: an argument list (never a shell), unquoted UTF-8
paths, a timeout, and failures as GateErrors that say what the gate was doing."""

from __future__ import annotations

import pytest
from support.gitrepo import commit, git, init

from gate.core.errors import GateError
from gate.core.git import git_text, merge_base, resolve_ref, run_git


@pytest.fixture
def forked(tmp_path):
    """main: base -> later; pr forks from base. (repo, base SHA, later SHA, pr SHA)."""
    repo = init(tmp_path / "vllm")
    base = commit(repo, "base", {"vllm/a.py": "a = 1\n"})
    git(repo, "checkout", "-q", "-b", "pr")
    pr = commit(repo, "pr", {"vllm/a.py": "a = 2\n"})
    git(repo, "checkout", "-q", "main")
    later = commit(repo, "later", {"vllm/b.py": "b = 1\n"})
    git(repo, "tag", "v1", base)
    return repo, base, later, pr


def test_run_git_returns_stdout_as_bytes(forked):
    repo, *_ = forked
    assert run_git(repo, ["show", "main:vllm/b.py"], "reading a file") == b"b = 1\n"


def test_paths_come_back_unquoted(forked):
    repo, *_ = forked
    commit(repo, "names", {"vllm/é café.py": "x\n"})
    names = git_text(repo, ["ls-files"], "listing files").splitlines()
    assert "vllm/é café.py" in names  # core.quotePath would print "vllm/\303\251 caf..."


def test_arguments_are_never_a_shell(forked, tmp_path):
    repo, *_ = forked
    marker = tmp_path / "pwned"
    with pytest.raises(GateError):
        run_git(repo, ["rev-parse", f"main; touch {marker}"], "resolving a ref")
    assert not marker.exists()


def test_a_git_failure_says_what_the_gate_was_doing_and_gits_last_line(forked):
    repo, *_ = forked
    with pytest.raises(GateError, match="^git failed while reading an object: fatal: Not a valid "
                                        "object name no-such-ref$"):
        run_git(repo, ["cat-file", "-p", "no-such-ref"], "reading an object")


def test_a_git_that_takes_too_long_is_stopped(forked):
    repo, *_ = forked
    with pytest.raises(GateError, match=r"^git timed out after 1s while waiting$"):
        run_git(repo, ["-c", "alias.nap=!sleep 5", "nap"], "waiting", timeout_s=1)


def test_without_git_on_path_the_error_says_so(forked, monkeypatch):
    repo, *_ = forked
    monkeypatch.setenv("PATH", str(repo))  # a folder without a git executable
    with pytest.raises(GateError, match="^git is not installed or not on PATH$"):
        run_git(repo, ["status"], "checking")


@pytest.mark.parametrize("ref", ["main", "v1", "pr", "pr~1", "HEAD"])
def test_a_ref_resolves_to_its_full_commit_sha(forked, ref):
    repo, base, later, pr = forked
    expected = {"main": later, "v1": base, "pr": pr, "pr~1": base, "HEAD": later}[ref]
    sha = resolve_ref(repo, ref)
    assert sha == expected and len(sha) == 40


def test_a_short_sha_resolves_too(forked):
    repo, base, *_ = forked
    assert resolve_ref(repo, base[:8]) == base


@pytest.mark.parametrize("ref", ["", "-h", "--output=/tmp/x"])
def test_a_ref_that_could_be_an_option_is_refused_before_git_runs(forked, ref):
    repo, *_ = forked
    with pytest.raises(GateError, match="^invalid git ref"):
        resolve_ref(repo, ref)


def test_a_missing_ref_says_how_to_fetch_it(forked):
    repo, *_ = forked
    with pytest.raises(GateError, match=r"ref 'origin/main' does not exist in .*fetch-depth: 0"):
        resolve_ref(repo, "origin/main")


def test_a_ref_to_something_not_a_commit_is_refused(forked):
    repo, *_ = forked
    tree = git(repo, "rev-parse", "main^{tree}")
    with pytest.raises(GateError, match="does not exist"):
        resolve_ref(repo, tree)


def test_merge_base_is_the_fork_point(forked):
    repo, base, later, pr = forked
    assert merge_base(repo, later, pr) == base
    assert merge_base(repo, "main", "pr") == base


def test_unrelated_histories_have_no_merge_base(forked):
    repo, _, later, _ = forked
    git(repo, "checkout", "-q", "--orphan", "other")
    orphan = commit(repo, "orphan", {"x.txt": "x\n"})
    with pytest.raises(GateError, match=r"no merge-base in .*unrelated histories, or a shallow"):
        merge_base(repo, later, orphan)
