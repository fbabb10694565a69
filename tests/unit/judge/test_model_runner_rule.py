"""The model runner in the verdict: results whose fingerprints come from recorded (CPU) and
constructed (GPU) server logs, judged by gate compare. Base and head served by different
runners is an error, never a verdict on speed; a runner other than the one pinned is an error;
a log that names two runners is an error; a server whose log named none is a warning."""

from __future__ import annotations

import pytest
from support.factories import cell, drain_results, fingerprint, make_results
from support.paths import FIXTURES

from gate.judge.compare import ABReference, NoReference, compare_results
from gate.judge.verdict import Outcome
from gate.measure.results import RequestRecord
from gate.plan.thresholds import Thresholds
from gate.runner.doctor import DoctorReport, served_facts
from gate.runner.fingerprint import with_served
from gate.runner.probes import parse_server_log, read_server_log

LOGS = FIXTURES / "server_logs"
T = Thresholds()


def served_by(log: str, rpm: float = 233.0, pinned: str | None = None, label: str = "head"):
    """Drain results of a server whose log is `log`, as gate run assembles them: the doctor
    reads the log, the fingerprint takes the runner it names."""
    facts = served_facts([], read_server_log(LOGS / log), host_cores=2)
    fp = fingerprint(runner=None).model_copy(update={"model_runner_pinned": pinned})
    results = drain_results([rpm], fp=with_served(fp, facts), label=label)
    return results.model_copy(update={"doctor": DoctorReport(served=facts)})


def test_base_and_head_on_different_runners_is_an_error_not_a_pass():
    base = served_by("gpu_v1_pinned.log", label="base")
    head = served_by("gpu_v2.log")  # the same speed: only the runner differs
    v = compare_results(head, ABReference(base), T)
    assert v.outcome == Outcome.ERROR and v.exit_code == 4
    (error,) = [e for e in v.errors if e.startswith("model runner differs")]
    assert "base V1 model runner (server log)" in error and "head V2 model runner" in error
    assert "VLLM_USE_V2_MODEL_RUNNER" in error
    assert v.headline.startswith("ERROR: the measurement cannot be judged: model runner differs")


@pytest.mark.parametrize(("base", "head"), [("gpu_v1_pinned.log", "gpu_v1_fallback.log"),
                                            ("gpu_v2.log", "gpu_v2.log"),
                                            ("cpu_v1.log", "cpu_v1.log")])
def test_the_same_runner_on_both_sides_is_judged(base, head):
    v = compare_results(served_by(head), ABReference(served_by(base, label="base")), T)
    assert v.outcome is not Outcome.ERROR and v.errors == []  # one round: maybe undecided
    assert not [w for w in v.warnings if "model runner" in w]


def test_a_runner_other_than_the_pinned_one_is_an_error():
    head = served_by("gpu_v1_fallback.log", pinned="v2")
    v = compare_results(head, NoReference(), T)
    assert v.outcome == Outcome.ERROR
    assert any("pins the V2 model runner but the V1 model runner served" in e for e in v.errors)


def test_a_log_naming_two_runners_is_an_error():
    text = (LOGS / "gpu_v2.log").read_text() + (LOGS / "gpu_v1_pinned.log").read_text()
    facts = served_facts([], parse_server_log(text), host_cores=2)
    head = drain_results([233.0], fp=with_served(fingerprint(runner=None), facts))
    head = head.model_copy(update={"doctor": DoctorReport(served=facts)})
    v = compare_results(head, NoReference(), T)
    assert v.outcome == Outcome.ERROR
    assert any("name more than one model runner" in e for e in v.errors)


def test_a_server_whose_log_named_no_runner_is_a_warning():
    head = drain_results([233.0], fp=fingerprint(runner=None))
    v = compare_results(head, NoReference(), T)
    assert v.outcome == Outcome.PASS
    assert "head: the server log did not say which model runner served" in v.warnings


def records(tokens: int, n: int = 4) -> list[RequestRecord]:
    return [RequestRecord(index=i, phase="sweep", arm="guided", concurrency=8, send_s=0.0,
                          ttft_s=0.1, e2el_s=1.0, output_tokens=tokens, finish_reason="stop",
                          http_status=200, text="x" * (3 * tokens), json_valid=True)
            for i in range(n)]


@pytest.mark.parametrize(("tokens", "warned"), [(40, True), (299, True), (300, False),
                                                (700, False)])
def test_outputs_far_shorter_than_the_plan_expects_are_a_warning(tokens, warned):
    results = make_results([cell("sweep", "guided", 8), cell("sweep", "free", 8)],
                           records=records(tokens))
    plan = results.plan.model_copy(deep=True)
    plan.workload.expected.output_tokens = 600
    v = compare_results(results.model_copy(update={"plan": plan}), NoReference(), T)
    found = [w for w in v.warnings if "did not have its intended shape" in w]
    assert bool(found) is warned
    if warned:
        assert f"averaged {tokens} tokens, under 50% of the 600" in found[0]
