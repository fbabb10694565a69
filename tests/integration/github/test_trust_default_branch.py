"""`gate trust check-on-default-branch`: the refs gate-bisect.yml measures must be commits
of the default branch, and the gate commit every workflow pins (GATE_REF) a commit of the
gate's default branch, asked of GitHub's compare API (the local fake of support.fake_github)
by the real command line."""

from __future__ import annotations

import subprocess

import pytest
from support.cli import gate_subprocess
from support.fake_github import FakeGitHub

REPO = "octo/vllm"
TOKEN = "ghs_BisectTrust_0123456789"
MAIN = ["a" * 40, "b" * 40, "c" * 40]
FORK = "f" * 40


@pytest.fixture
def fake():
    with FakeGitHub(REPO) as server:
        server.good_tokens.add(TOKEN)
        server.default_branch = "trunk"
        server.branches = {"trunk": MAIN, "feature": [*MAIN, "d" * 40]}
        server.elsewhere = {FORK, "d" * 40}
        yield server


def check(fake: FakeGitHub, *shas: str) -> subprocess.CompletedProcess:
    env = {"GITHUB_API_URL": fake.url, "GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": TOKEN}
    args = [a for sha in shas for a in ("--sha", sha)]
    return gate_subprocess("trust", "check-on-default-branch", *args, env=env, timeout=60)


def test_commits_of_the_default_branch_pass(fake):
    proc = check(fake, MAIN[0], MAIN[2])
    assert proc.returncode == 0, proc.stderr
    assert f"{MAIN[0]} is a commit of {REPO}'s default branch trunk" in proc.stdout
    compares = [r.path for r in fake.requests_to("GET", "/compare/")]
    assert compares == [f"/repos/{REPO}/compare/trunk...{MAIN[0]}",
                        f"/repos/{REPO}/compare/trunk...{MAIN[2]}"]
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in fake.requests)


@pytest.mark.parametrize("sha", [FORK, "d" * 40])
def test_a_fork_or_feature_branch_commit_is_refused(fake, sha):
    proc = check(fake, MAIN[1], sha)
    assert proc.returncode == 1
    assert f"{sha} is not a commit of the default branch trunk (GitHub: diverged)" in proc.stderr


def test_an_unknown_commit_is_refused(fake):
    proc = check(fake, "9" * 40)
    assert proc.returncode == 1 and "is not a commit of this repository" in proc.stderr


@pytest.mark.parametrize("refused", ["repository", "compare"])
def test_when_github_cannot_tell_the_check_fails_closed(fake, refused):
    """A token without contents: read gets a 403 for the repository or for the compare."""
    if refused == "compare":  # the repository lookup goes through first
        fake.fail_next(200)
        fake.failures[0].body = {"full_name": REPO, "default_branch": "trunk"}
    fake.fail_next(403, message="Resource not accessible by integration")
    proc = check(fake, MAIN[0])
    assert proc.returncode == 4 and "Failing closed" in proc.stderr


@pytest.mark.parametrize("sha", ["main", MAIN[0][:12], MAIN[0].upper(), f"{MAIN[0]}; true"])
def test_a_ref_that_is_not_a_full_sha_is_bad_input_and_asks_nothing(fake, sha):
    proc = check(fake, sha)
    assert proc.returncode == 2 and "not a full 40-character" in proc.stderr
    assert fake.requests == []


GATE = "octo/structured-output-gate"


def test_the_pinned_gate_commit_must_be_on_the_gates_default_branch(fake):
    """Security review L7: a 40-hex GATE_REF can name a commit that exists only in a fork of
    the gate (an "impostor commit", fetchable through the parent): the format check passes
    it, the compare against the gate's default branch does not."""
    fake.others[GATE] = {"default_branch": "main", "branches": {"main": MAIN}}
    env = {"GITHUB_API_URL": fake.url, "GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": TOKEN}
    ok = gate_subprocess("trust", "check-on-default-branch", "--repo", GATE, "--sha", MAIN[1],
                         env=env, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert f"is a commit of {GATE}'s default branch main" in ok.stdout
    assert fake.requests_to("GET", f"/repos/{GATE}/compare/main...{MAIN[1]}")
    impostor = gate_subprocess("trust", "check-on-default-branch", "--repo", GATE, "--sha",
                               FORK, env=env, timeout=60)
    assert impostor.returncode == 1 and f"{FORK} is not a commit of this repository" in (
        impostor.stderr)
    bad = gate_subprocess("trust", "check-on-default-branch", "--repo", "not a repo", "--sha",
                          MAIN[1], env=env, timeout=60)
    assert bad.returncode == 2 and "is not owner/name" in bad.stderr
