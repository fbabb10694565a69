"""The history tied to the other stages (gate.flows.history): what may be recorded, who may
acknowledge and for which head, the verdict with its acknowledgements, and git ancestry."""

from __future__ import annotations

import pytest
from support import factories as f
from support.gitrepo import commit, init

from gate.core.errors import GateError
from gate.flows.history import (
    AckRequest,
    acknowledge,
    acknowledged_verdict,
    git_ancestry,
    link_merges,
    record_run,
)
from gate.github.client import GitHubClient
from gate.history.store import RunMeta, opened
from gate.judge.verdict import Outcome

HEAD, OLD = "a" * 40, "b" * 40


def run(**kw):
    return f.drain_results([230.0, 236.0], plan=f.cpu_plan(), fp=f.fingerprint(), **kw)


@pytest.mark.parametrize(("results", "branch", "words"), [
    (lambda: run(), "feature/x", "not the default branch"),
    (lambda: run(), "", "cannot tell which branch"),
    (lambda: run(status="error"), "main", "not complete"),
    (lambda: f.make_results([f.cell("drain", "guided", 64, failed=3)], plan=f.cpu_plan()),
     "main", "failed"),
])
def test_an_unfit_run_is_never_recorded(tmp_path, results, branch, words):
    with opened(tmp_path / "h.sqlite", create=True) as store:
        with pytest.raises(GateError, match=words):
            record_run(store, results(), RunMeta(commit=HEAD, branch=branch),
                       default_branch="main")
        assert store.runs() == []


@pytest.fixture
def gh(fake):
    fake.permissions.update({"maintainer": "write", "reader": "read"})
    fake.pulls[12] = {"number": 12, "head": {"sha": HEAD}}
    return GitHubClient(fake.url, fake.repository, "good-token")


def request(**kw):
    fields = {"pr": 12, "head_sha": HEAD, "check": "drain.req_per_min",
              "reason": "pinned memory for correctness", "login": "maintainer",
              "created_at": "2026-01-02T00:00:00+00:00"} | kw
    return AckRequest(**fields)


def test_a_writer_acknowledges_the_current_head(tmp_path, gh):
    with opened(tmp_path / "h.sqlite", create=True) as store:
        kept = acknowledge(store, gh, request())
        assert kept.permission == "write" and kept.repository == "octo/vllm"
        assert store.acknowledgements() == [kept]


@pytest.mark.parametrize(("kw", "words"), [
    ({"login": "reader"}, "reader has read access"),
    ({"head_sha": OLD}, "a new push needs a new acknowledgement"),
    ({"check": "drain"}, "is not a check name"),
    ({"head_sha": "abc"}, "full 40-character"),
    ({"reason": "  "}, "needs a reason"),
])
def test_an_acknowledgement_is_refused_and_nothing_kept(tmp_path, gh, kw, words):
    with opened(tmp_path / "h.sqlite", create=True) as store:
        with pytest.raises(GateError, match=words):
            acknowledge(store, gh, request(**kw))
        assert store.acknowledgements() == []


def test_the_verdict_of_the_acknowledged_head_turns_neutral(tmp_path, gh):
    v = f.verdict()
    v = v.model_copy(update={"checks": [c for c in v.checks if c.name != "sweep.c32.ratio"]})
    with opened(tmp_path / "h.sqlite", create=True) as store:
        for check in ("drain.req_per_min", "sweep.c8.tpot_p50_ms"):
            acknowledge(store, gh, request(check=check))
        applied = acknowledged_verdict(v, store, 12, HEAD)
        pushed = acknowledged_verdict(v, store, 12, OLD)
    assert applied.outcome == Outcome.PASS and pushed.outcome == Outcome.FAIL


def test_git_ancestry_places_a_merge_between_two_nights(tmp_path):
    repo = init(tmp_path / "repo")
    first = commit(repo, "night 1", {"a.txt": "1"})
    merge = commit(repo, "the acknowledged PR", {"a.txt": "2"})
    second = commit(repo, "night 2", {"a.txt": "3"})
    is_ancestor = git_ancestry(repo)
    assert is_ancestor(merge, second) and not is_ancestor(merge, first)
    assert not is_ancestor("f" * 40, second)  # unknown commit: not an ancestor


MERGED = "d" * 40


def merged_pull(head=HEAD, base="main", merged=True):
    return {"number": 12, "head": {"sha": head}, "base": {"ref": base}, "state": "closed",
            "merged_at": "2026-01-03T00:00:00Z" if merged else None,
            "merge_commit_sha": MERGED if merged else None}


@pytest.mark.parametrize(("pull", "linked", "words"), [
    (merged_pull(), True, ""),
    (merged_pull(merged=False), False, "not merged"),
    (merged_pull(head=OLD), False, "not at the acknowledged head"),
    (merged_pull(base="release"), False, "merged into release, not main"),
])
def test_a_merged_acknowledged_head_marks_the_commit_it_became(tmp_path, fake, gh, pull, linked,
                                                               words):
    with opened(tmp_path / "h.sqlite", create=True) as store:
        acknowledge(store, gh, request())
        fake.pulls[12] = pull
        done = link_merges(store, gh, default_branch="main")
        (kept,) = store.acknowledgements()
        assert (kept.merged_commit == MERGED) is linked
        assert [a.merged_commit for a in done.linked] == ([MERGED] if linked else [])
        assert all(words in n for n in done.notes) and bool(done.notes) is not linked
        again = link_merges(store, gh, default_branch="main")  # once linked, not asked again
        assert again.linked == [] and (again.notes == []) is linked
    assert len(fake.requests_to("GET", "/pulls/12")) == 2 + (not linked)  # acknowledge asked once
