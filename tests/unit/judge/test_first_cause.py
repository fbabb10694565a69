"""The first line of an error verdict names the cause: a side's run error before what followed
from it, and of a server's death the build and the last error line of its log."""

from __future__ import annotations

from support.factories import cell, make_results

from gate.judge.compare import ABReference, compare_results
from gate.judge.first_cause import cause_line, causes_first, condensed, is_cause, log_cause
from gate.judge.verdict import Outcome
from gate.plan.thresholds import Thresholds

DIED = ("base: vllm serve exited with code 1 before it became healthy; last lines of "
        "/out/base/block1/server.log:\nINFO loading\nTraceback (most recent call last):\n"
        '  File "x.py", line 1\nRuntimeError: operator torchvision::nms does not exist\n'
        "INFO shutting down")


def test_a_dead_base_is_the_headline_before_the_heads_empty_results():
    head = make_results([], label="head")  # the block stopped before any cell
    base = make_results([cell("sweep", "guided", 8)], label="base", errors=[DIED],
                        status="error")
    v = compare_results(head, ABReference(base), Thresholds())
    assert v.outcome == Outcome.ERROR
    assert v.errors[0].startswith("base run error: base: vllm serve exited with code 1")
    assert "head results hold no measured cells" in v.errors[1:]
    assert v.headline == (
        "ERROR: the base build's server died: vllm serve exited with code 1 before it became "
        "healthy; its log ends: RuntimeError: operator torchvision::nms does not exist (+1 "
        "more)")


def test_other_errors_keep_their_order_and_a_one_line_headline():
    errors = ["head results hold no measured cells", "head run error: requests failed\nmore"]
    assert causes_first(errors) == [errors[1], errors[0]]
    assert is_cause(errors[1]) and not is_cause(errors[0])
    assert not is_cause("plan_hash differs: base run error: x")
    assert cause_line(["head run error: 3 requests failed"]) is None  # not a death
    assert condensed("two\nlines") == "two"


def test_the_log_line_that_says_what_went_wrong():
    assert log_cause("INFO a\nValueError: bad\nINFO exiting\n") == "ValueError: bad"
    assert log_cause("INFO a\nINFO b\n") == "INFO b"
    assert log_cause("") == ""
