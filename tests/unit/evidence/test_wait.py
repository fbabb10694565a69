"""Where the wait is: the TTFT a head build added, split by vLLM's queue and prefill times and
set against the free arm's queue at the same level."""

from __future__ import annotations

from support.factories import cell, cpu_plan, fingerprint, make_results

from gate.evidence.wait import ArmWait, cause, findings, wait_rows
from gate.measure.results import ServerTimes


def build(unique_ttft: float, unique_queue: float, free_queue: float = 5.0,
          prefill: float = 20.0, label: str = "head"):
    def times(queue: float) -> ServerTimes:
        return ServerTimes(requests=20, queue_ms=queue, prefill_ms=prefill, ttft_ms=queue + prefill)

    cells = [cell("sweep", "unique", 4, ttft_p50=unique_ttft, server_times=times(unique_queue)),
             cell("sweep", "free", 4, ttft_p50=30.0, server_times=times(free_queue)),
             cell("sweep", "guided", 4, ttft_p50=32.0, server_times=times(free_queue + 1))]
    return make_results(cells, plan=cpu_plan(), fp=fingerprint(), label=label)


def test_a_compile_regression_is_named_as_the_wait_for_the_grammar():
    base, head = build(100.0, 70.0, label="base"), build(500.0, 465.0)
    rows = {(r.arm, r.concurrency): r for r in wait_rows(head, base)}
    unique = rows[("unique", 4)]
    assert unique.head.grammar_wait_ms == 460.0 and unique.base.grammar_wait_ms == 65.0
    assert unique.cause.startswith("waiting for the grammar: +395 ms of the +400 ms")
    assert rows[("guided", 4)].cause == ""  # its TTFT did not move
    assert findings(list(rows.values())) == [
        f"TTFT p50 (unique schemas (cache miss), c=4) +400 ms: {unique.cause}"]


def test_slower_steps_are_named_as_queueing_for_capacity_not_the_grammar():
    base = build(100.0, 70.0, free_queue=5.0, label="base")
    head = build(300.0, 270.0, free_queue=205.0)
    unique = next(r for r in wait_rows(head, base) if r.arm == "unique")
    assert unique.cause.startswith("queueing for capacity: +200 ms")


def test_a_slower_first_step_is_named_prefill():
    head, base = ArmWait(200.0, 10.0, 180.0, 10.0), ArmWait(50.0, 10.0, 30.0, 10.0)
    assert cause(head, base).startswith("prefill: +150 ms of the +150 ms")


def test_noise_and_missing_metrics_name_nothing_or_say_so():
    base = ArmWait(100.0, 10.0, 20.0, 5.0)
    assert cause(ArmWait(104.0, 12.0, 20.0, 5.0), base) == ""  # under 10% and 5 ms
    blind = cause(ArmWait(300.0, None, None, None), ArmWait(100.0, None, None, None))
    assert blind.startswith("not attributed: the server's /metrics gave no")
    assert cause(ArmWait(300.0, 60.0, 20.0, 5.0), None) == "requests wait 55 ms for their grammar"


def test_ttft_that_grew_with_the_step_time_is_named_slower_steps():
    """The per-step class (the seed's): TPOT doubled in the same cells, TTFT doubled too,
    neither the queue nor the prefill histograms moved enough to explain it."""
    base = ArmWait(50.0, 10.0, 30.0, 10.0, tpot_ms=20.0)
    head = ArmWait(110.0, 12.0, 40.0, 10.0, tpot_ms=42.0)
    text = cause(head, base)
    assert text.startswith("slower engine steps: TPOT p50 +110%") and "TTFT +120%" in text
    # the same TTFT with steps unchanged is not put on them
    assert not cause(ArmWait(110.0, 12.0, 40.0, 10.0, tpot_ms=20.5), base).startswith("slower")
