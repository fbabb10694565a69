"""changepoints.json (gate.history.model) and the promotion rule (gate.history.promotion)."""

from __future__ import annotations

import json

import pytest
from support import factories as f

from gate.core.errors import GateError
from gate.history.detect import detect_store
from gate.history.model import Detection, load_detection, save_detection
from gate.history.promotion import promotion
from gate.history.replay import as_series, nights
from gate.judge.verdict import Outcome

RUNNER = "cpu: replay"


def detection_of(values, **kw) -> Detection:
    return detect_store([as_series(values, runner_class=RUNNER)], **kw)


def test_the_detection_file_round_trips_and_refuses_another_version(tmp_path):
    found = detection_of(nights(50, level=233.0, sd=0.03, seed=1, step_at=30, step=0.6))
    path = save_detection(found, tmp_path / "changepoints.json")
    assert load_detection(path) == found
    data = json.loads(path.read_text())
    data["schema_version"] = 7
    path.write_text(json.dumps(data))
    with pytest.raises(GateError, match="change-point file .* has schema v7; this gate reads v1"):
        load_detection(path)
    path.write_text("{")
    with pytest.raises(GateError, match="change-point file"):
        load_detection(path)


def test_for_run_picks_the_plan_and_runner_class():
    found = detection_of(nights(20, level=233.0, sd=0.03, seed=2))
    assert len(found.for_run("cpu-smoke", RUNNER)) == 1
    assert found.for_run("cpu-smoke", "gpu: other") == [] and found.for_run("x", RUNNER) == []


def failing_comparison():
    return f.verdict(outcome=Outcome.FAIL)  # drain -48% and TPOT +100% fail


def test_a_run_slower_than_the_stored_baseline_is_not_promoted():
    decision = promotion(failing_comparison(), None, plan="cpu-smoke", runner_class=RUNNER)
    assert not decision.allowed
    assert any("Drain req/min (guided): -48.1% against the stored baseline" in r
               for r in decision.refused)


def test_a_regressed_series_is_not_promoted_and_a_healthy_one_is():
    bad = detection_of(nights(50, level=233.0, sd=0.03, seed=3, step_at=30, step=0.6))
    decision = promotion(None, bad, plan="cpu-smoke", runner_class=RUNNER)
    assert not decision.allowed and "gate history detect" in decision.refused[0]
    good = detection_of(nights(50, level=233.0, sd=0.03, seed=3))
    assert promotion(None, good, plan="cpu-smoke", runner_class=RUNNER).allowed
    # another runner's regression does not hold this one back
    assert promotion(None, bad, plan="cpu-smoke", runner_class="gpu: x").allowed


def test_an_acknowledged_slowdown_is_promoted_with_its_reason():
    from gate.history.model import Acknowledgement

    series = as_series(nights(50, level=233.0, sd=0.03, seed=4, step_at=30, step=0.52),
                       runner_class=RUNNER)
    ack = Acknowledgement(repository="o/r", pr=45424, head_sha="e" * 40,
                          check="drain.req_per_min", reason="pin memory before the h2d copy",
                          login="maintainer", permission="write", created_at="2026-01-01",
                          merged_commit=series.points[30].commit)
    found = detect_store([series], acknowledgements=[ack])
    comparison = failing_comparison()
    comparison = comparison.model_copy(update={"checks": [
        c for c in comparison.checks if c.name == "drain.req_per_min"]})
    decision = promotion(comparison, found, plan="cpu-smoke", runner_class=RUNNER)
    assert decision.allowed, decision.refused
    assert decision.acknowledged == ["drain.req_per_min slower on purpose: PR 45424, "
                                     "acknowledged by maintainer: pin memory before the h2d copy"]
    # a second failing check that nobody acknowledged still refuses it
    assert not promotion(failing_comparison(), found, plan="cpu-smoke",
                         runner_class=RUNNER).allowed
