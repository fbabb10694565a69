"""The comment file carries the comment's pictures (each check's nights on the default branch,
the sequential test look by look) to the poster, at schema version 3; and the poster checks
every acknowledgement the file's verdict claims against its own copy of the history, and
applies those of the measured head, against the local GitHub server."""

from __future__ import annotations

import io
import json

import pytest
from support import factories as f
from support.cli import gate_in_process
from support.fake_github import TOKEN

from gate.core.errors import GateError
from gate.core.settings import Settings
from gate.github.client import GitHubClient
from gate.github.comment_file import CommentRun, load_comment_file
from gate.github.publish import PostTarget, post_comment_file
from gate.history.model import Acknowledgement
from gate.history.store import opened
from gate.judge.acknowledge import Acknowledgement as Ack
from gate.judge.acknowledge import apply_acknowledgements
from gate.judge.looks import Look, Trajectory
from gate.judge.verdict import Outcome
from gate.report.render import outcome_tag

HEAD, OLD = "a" * 40, "b" * 40
NIGHTS = [233.0, 231.0, 235.0, 232.0, 121.0, 122.0]
AT = "2026-01-02T00:00:00+00:00"


def settings(fake, tmp_path) -> Settings:
    return Settings.from_env({"GITHUB_REPOSITORY": fake.repository, "GITHUB_API_URL": fake.url,
                              "GITHUB_TOKEN": TOKEN, "GITHUB_OUTPUT": str(tmp_path / "out")})


def client(s: Settings) -> GitHubClient:
    return GitHubClient(s.api_url, s.repository or "", s.github_token)


def failing():
    """Two failing relative checks (the regression), no absolute bound."""
    v = f.verdict(outcome=Outcome.FAIL)
    return v.model_copy(update={"checks": [c for c in v.checks if c.kind != "absolute"]})


def history(tmp_path, *acks: tuple[str, str, str], repository="octo/vllm"):
    """A history file keeping (check, head, login) acknowledgements of PR 12."""
    path = tmp_path / "history.sqlite"
    with opened(path, create=True) as store:
        for check, head, login in acks:
            store.acknowledge(Acknowledgement(
                repository=repository, pr=12, head_sha=head, check=check, login=login,
                reason="pinned memory for correctness", permission="write", created_at=AT))
    return path


def post(fake, tmp_path, verdict, db=None, head=HEAD):
    fake.pulls[12] = {"number": 12, "head": {"sha": HEAD}}
    path = f.comment_file(tmp_path, [CommentRun(verdict=verdict)])
    post_comment_file(settings(fake, tmp_path), path, client_factory=client, err=io.StringIO(),
                      target=PostTarget(pr=12, expect_head_sha=head, history=db))
    return fake.comments[12][-1]["body"]


# -- the pictures ------------------------------------------------------------------------
def test_the_posted_comment_shows_the_nights_on_main_and_the_test_look_by_look(fake, tmp_path):
    seen = [Look(round=2, delta_pct=-45.0, low_pct=None, high_pct=None,
                 outcome=Outcome.INCONCLUSIVE),
            Look(round=4, delta_pct=-48.0, low_pct=-55.0, high_pct=-41.0, outcome=Outcome.FAIL)]
    looks = [Trajectory(check="drain.req_per_min", label="Drain req/min (guided)", looks=seen,
                        threshold_pct=-10.0, max_rounds=8)]
    run = CommentRun(verdict=failing(), history={"drain.req_per_min": NIGHTS},
                     trajectories=looks)
    fake.pulls[12] = {"number": 12, "head": {"sha": HEAD}}
    path = f.comment_file(tmp_path, [run])
    assert json.loads(path.read_text())["schema_version"] == 3
    post_comment_file(settings(fake, tmp_path), path, client_factory=client, err=io.StringIO(),
                      target=PostTarget(pr=12))
    body = fake.comments[12][0]["body"]
    assert "Main, nightly" in body and "████▁▁" in body  # four nights at the level, two off
    assert "The sequential test, look by look" in body
    assert "failed at round 4: -48.0% (-55.0% to -41.0%), past the threshold -10%" in body


def test_a_comment_file_of_another_version_is_refused_as_such(tmp_path):
    path = f.comment_file(tmp_path)
    path.write_text(json.dumps({**json.loads(path.read_text()), "schema_version": 2}))
    with pytest.raises(GateError, match="has schema v2; this gate reads v3"):
        load_comment_file(path)


@pytest.mark.parametrize("bad", [
    {"history": {"drain.req_per_min": [233.0] * 31}},
    {"history": {"drain.req_per_min": [233.0, float("inf")]}},
    {"history": {"<img src=x>": [233.0]}},
    {"trajectories": [{"check": "c.d", "label": "C", "looks": [], "threshold_pct": -10.0,
                       "max_rounds": 8}]},
    {"trajectories": [{"check": "c.d", "label": "C", "threshold_pct": float("nan"),
                       "max_rounds": 8, "looks": [{"round": 2, "delta_pct": -4.0,
                                                   "low_pct": None, "high_pct": None,
                                                   "outcome": "fail", "gross": False}]}]},
])
def test_the_pictures_read_back_are_checked(tmp_path, bad):
    path = f.comment_file(tmp_path)
    data = json.loads(path.read_text())
    data["runs"][0].update(bad)
    path.write_text(json.dumps(data, allow_nan=True))
    with pytest.raises(GateError, match="invalid comment file"):
        load_comment_file(path)


# -- acknowledgements --------------------------------------------------------------------
def test_the_poster_applies_the_acknowledgements_of_the_measured_head(fake, tmp_path):
    db = history(tmp_path, ("drain.req_per_min", HEAD, "maintainer"),
                 ("sweep.c8.tpot_p50_ms", HEAD, "maintainer"))
    body = post(fake, tmp_path, failing(), db)
    assert outcome_tag(Outcome.PASS) in body
    assert body.count("➖ neutral: acknowledged fail") == 2
    assert "slowdown acknowledged by maintainer" in body


def test_an_acknowledgement_of_another_head_has_no_effect(fake, tmp_path):
    db = history(tmp_path, ("drain.req_per_min", OLD, "maintainer"),
                 ("sweep.c8.tpot_p50_ms", OLD, "maintainer"))
    body = post(fake, tmp_path, failing(), db)
    assert outcome_tag(Outcome.FAIL) in body and "neutral" not in body


def test_another_repositorys_acknowledgement_has_no_effect(fake, tmp_path):
    db = history(tmp_path, ("drain.req_per_min", HEAD, "maintainer"),
                 ("sweep.c8.tpot_p50_ms", HEAD, "maintainer"), repository="mallory/vllm")
    assert outcome_tag(Outcome.FAIL) in post(fake, tmp_path, failing(), db)


def claimed(check="drain.req_per_min", login="maintainer", head=HEAD):
    """A verdict as a measuring job that applied an acknowledgement writes it."""
    given = [Ack(check=check, login=login, reason="pinned memory for correctness",
                 head_sha=head, at=AT)]
    return apply_acknowledgements(failing(), given, head)


@pytest.mark.parametrize(("db_acks", "words"), [
    ((), r"only the history \(--history\) can confirm"),
    ((("drain.req_per_min", OLD, "maintainer"),), "does not hold for PR #12"),
    ((("drain.req_per_min", HEAD, "someone"),), "does not hold for PR #12"),
])
def test_an_acknowledgement_the_history_does_not_hold_is_never_posted(fake, tmp_path, db_acks,
                                                                      words):
    db = history(tmp_path, *db_acks) if db_acks else None
    with pytest.raises(GateError, match=words):
        post(fake, tmp_path, claimed(), db)
    assert not fake.requests_to("POST") and not fake.requests_to("PATCH")


def test_a_claimed_acknowledgement_the_history_holds_is_posted(fake, tmp_path):
    db = history(tmp_path, ("drain.req_per_min", HEAD, "maintainer"))
    body = post(fake, tmp_path, claimed(), db)
    assert body.count("➖ neutral: acknowledged fail") == 1
    assert body.count("slowdown acknowledged by maintainer") == 1


def test_the_history_needs_the_measured_head(fake, tmp_path, monkeypatch):
    db = history(tmp_path, ("drain.req_per_min", HEAD, "maintainer"))
    path = f.comment_file(tmp_path)
    for key, value in {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": fake.repository,
                       "GITHUB_API_URL": fake.url}.items():
        monkeypatch.setenv(key, value)
    proc = gate_in_process("publish", "--post-comment-file", str(path), "--pr", "12",
                           "--history", str(db))
    assert proc.returncode == 2 and "--history needs --expect-head-sha" in proc.stderr
    assert not fake.comments.get(12)
