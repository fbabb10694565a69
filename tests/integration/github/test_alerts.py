"""One issue per change point, against the local GitHub server (gate.github.alerts): created
once with the bisect over its range dispatched, updated as nights come in, closed on recovery
or acknowledgement, found again by its hidden marker, and never someone else's."""

from __future__ import annotations

import pytest
from support.fake_github import GITHUB_ACTIONS, FakeClock, FakeGitHub

from gate.github.alerts import AlertSettings, parse_issue, sync_alerts
from gate.github.client import Clock, GitHubClient, RetryPolicy
from gate.history.detect import detect_series
from gate.history.model import Acknowledgement
from gate.history.replay import as_series, nights
from gate.report.alert import MARKER

SHAS = [f"{i:02x}" * 20 for i in range(1, 100)]
BISECT_INPUTS = {"good", "bad", "plan", "issue"}  # workflows/gate-bisect.yml's inputs
SETTINGS = AlertSettings(server_url="https://github.com", ref="main",
                         bisect_plan="a100-gemma4-26b-pr")


@pytest.fixture
def gh(fake: FakeGitHub, clock: FakeClock) -> GitHubClient:
    fake.workflows["gate-bisect.yml"] = BISECT_INPUTS
    return GitHubClient(fake.url, fake.repository, "good-token",
                        clock=Clock(clock.sleep, clock.now), retry=RetryPolicy(backoff_s=0.01))


def night_series(count, *, step_at=30, step=0.6, recover_at=None, seed=1):
    values = nights(count, level=233.0, sd=0.03, seed=seed, step_at=step_at, step=step)
    if recover_at is not None:
        values[recover_at:] = nights(count - recover_at, level=233.0, sd=0.03, seed=seed + 50)
    return as_series(values, commits=SHAS[:count])


def sync(gh, series, acks=None, settings=SETTINGS):
    sd = detect_series(series, acknowledgements=acks or [])
    return sync_alerts(gh, GITHUB_ACTIONS, detection=[sd], series={sd.key: series},
                       settings=settings)


def test_a_new_change_point_opens_one_issue_and_dispatches_the_bisect(fake, gh):
    done = sync(gh, night_series(40))
    assert done.created == [1] and done.dispatched == [1]
    (issue,) = fake.issues.values()
    assert issue["state"] == "open" and issue["user"]["login"] == GITHUB_ACTIONS
    assert issue["title"].startswith("Perf regression on the default branch: drain req/min")
    assert issue["body"].startswith(f"<!-- {MARKER}:cpu-smoke/cpu-replay/drain.req_per_min -->")
    assert f"-range:{SHAS[29]}..{SHAS[30]} -->" in issue["body"]
    assert "The bisect over this range was dispatched" in issue["body"]
    assert fake.dispatches == [{"workflow": "gate-bisect.yml", "ref": "main", "inputs": {
        "good": SHAS[29], "bad": SHAS[30], "plan": "a100-gemma4-26b-pr", "issue": "1"}}]


def test_the_next_nights_update_the_same_issue_and_dispatch_nothing_more(fake, gh):
    sync(gh, night_series(40))
    done = sync(gh, night_series(45))
    assert done.created == [] and done.updated == [1] and done.dispatched == []
    assert len(fake.issues) == 1 and len(fake.dispatches) == 1
    assert "| Persistence | 15 of 15 nights" in fake.issues[1]["body"]
    assert "The bisect over this range was dispatched" in fake.issues[1]["body"]  # kept


def test_a_recovery_closes_the_issue(fake, gh):
    sync(gh, night_series(40))
    done = sync(gh, night_series(60, recover_at=45))
    assert done.closed == [1]
    issue = fake.issues[1]
    assert issue["state"] == "closed" and issue["state_reason"] == "completed"
    assert "Recovered: the level came back at" in issue["body"]
    # and it stays closed on the nights after
    again = sync(gh, night_series(62, recover_at=45))
    assert again.created == [] and again.updated == [] and fake.issues[1]["state"] == "closed"


def test_an_acknowledged_slowdown_closes_its_issue_and_opens_none(fake, gh):
    series = night_series(40)
    ack = Acknowledgement(repository=fake.repository, pr=12, head_sha="e" * 40,
                          check="drain.req_per_min", reason="pinned memory", login="maintainer",
                          permission="write", created_at="2026-01-01",
                          merged_commit=series.points[30].commit)
    assert sync(gh, series, [ack]).created == []
    sync(gh, series)  # opened before the merge was linked
    done = sync(gh, night_series(41), [ack])
    assert done.closed == [1] and "Acknowledged as intended in PR 12" in fake.issues[1]["body"]


def test_an_issue_someone_else_opened_with_the_marker_is_never_touched(fake, gh):
    sd = detect_series(night_series(40))
    forged = (f"<!-- {MARKER}:{sd.key} -->\n<!-- {MARKER}-range:{SHAS[29]}..{SHAS[30]} -->\n"
              "click here")
    fake.add_issue("forged", forged, login="mallory")
    done = sync(gh, night_series(40))
    assert done.created == [2]
    assert fake.issues[1]["body"] == forged and fake.issues[1]["state"] == "open"
    assert parse_issue(fake.issues[1], GITHUB_ACTIONS) is None


def test_a_create_that_got_a_502_is_not_sent_twice(fake, gh):
    fake.break_next_create("502")
    done = sync(gh, night_series(40))
    assert done.created == [1] and len(fake.issues) == 1 and len(fake.dispatches) == 1


def test_a_refused_dispatch_is_said_in_the_issue(fake, gh):
    del fake.workflows["gate-bisect.yml"]
    done = sync(gh, night_series(40))
    assert done.dispatched == [] and "404" in done.notes[0]
    assert "The bisect was not dispatched (GitHub refused the dispatch" in fake.issues[1]["body"]
    assert f"<!-- {MARKER}-bisect:not-dispatched -->" in fake.issues[1]["body"]


def test_a_change_point_that_moved_a_night_keeps_its_issue(fake, gh):
    series = night_series(40)
    sync(gh, series)
    body = fake.issues[1]["body"].replace(f"{SHAS[29]}..{SHAS[30]}", f"{SHAS[30]}..{SHAS[31]}")
    fake.issues[1]["body"] = body  # as if it was first found one night later
    done = sync(gh, night_series(41))
    assert done.created == [] and done.updated == [1]
    assert f"-range:{SHAS[29]}..{SHAS[30]} -->" in fake.issues[1]["body"]


def test_an_alert_no_longer_detected_is_closed(fake, gh):
    sync(gh, night_series(40))
    flat = as_series(nights(41, level=233.0, sd=0.03, seed=9), commits=SHAS[:41])
    done = sync(gh, flat)
    assert done.closed == [1] and fake.issues[1]["state_reason"] == "not_planned"
    assert "no longer finds this change point" in fake.issues[1]["body"]
