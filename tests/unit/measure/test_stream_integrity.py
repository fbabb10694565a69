"""Stream integrity: a request whose output arrived in a burst is coalesced, never a latency."""

from __future__ import annotations

import pytest

from gate.measure import stream_integrity
from gate.measure.metrics import summarize_cell
from gate.measure.results import CellKey, RequestRecord


def record(index: int, tokens: int, deliveries: int, ttft: float = 0.01, e2el: float = 0.33,
           gap: float = 0.01) -> RequestRecord:
    return RequestRecord(
        index=index, phase="sweep", arm="free", concurrency=8, send_s=0.0, ttft_s=ttft,
        itl_s=[gap] * (tokens - 1), deliveries=deliveries, e2el_s=e2el, output_tokens=tokens,
        finish_reason="length", http_status=200)


@pytest.mark.parametrize(("tokens", "deliveries", "per_chunk", "coalesced"), [
    (33, 33, 1, False),  # one arrival per token: a stream
    (33, 1, 1, True),  # everything in one read: held back
    (33, 16, 1, True),  # fewer than half the arrivals it should have had
    (33, 17, 1, False),
    (33, 3, 6, False),  # speculative decoding: up to 6 tokens per step
    (33, 2, 6, True),
    (3, 1, 1, False),  # too short to tell
])
def test_coalesced_means_far_fewer_arrivals_than_tokens(tokens, deliveries, per_chunk, coalesced):
    assert stream_integrity.is_coalesced(record(0, tokens, deliveries), per_chunk) is coalesced


def test_a_failed_or_unmeasured_request_is_never_called_coalesced():
    failed = record(0, 33, 1).model_copy(update={"http_status": 500, "error": "HTTP 500"})
    legacy = record(1, 33, 1).model_copy(update={"deliveries": None})
    assert stream_integrity.coalesced([failed, legacy], 1) == []


def test_coalesced_requests_count_in_throughput_but_not_in_latencies():
    streamed = [record(i, 33, 33, ttft=0.01, e2el=0.33) for i in range(4)]
    burst = [record(4, 33, 1, ttft=0.2, e2el=0.2001, gap=0.0)]
    cell = summarize_cell(streamed + burst, CellKey("sweep", "free", 8), 1.0)
    assert cell.completed == 5 and cell.request_throughput == pytest.approx(5.0)
    assert cell.coalesced_requests == 1
    assert cell.tpot_ms.count == 4 and cell.tpot_ms.p50 == pytest.approx(10.0)
    assert cell.ttft_ms.p50 == pytest.approx(10.0) and cell.itl_ms.count == 4 * 32


def test_the_description_names_the_burst():
    text = stream_integrity.describe([record(7, 33, 1, ttft=0.186, e2el=0.1864)], 1)
    assert text == ("1 of 1 requests arrived coalesced (e.g. request 7: 33 tokens in 1 "
                    "arrival(s), TTFT 186.0 ms vs E2EL 186.4 ms)")


def test_a_window_takes_its_throughput_from_the_token_flow():
    records = [record(i, 33, 33) for i in range(4)]  # 4 requests of 33 tokens measured
    cell = summarize_cell(records, CellKey("sweep", "free", 8), 2.0, tokens_in_window=330.0)
    assert cell.output_throughput == pytest.approx(165.0)  # 330 tokens in 2 s
    assert cell.request_throughput == pytest.approx(5.0)  # / 33 tokens per request
    counted = summarize_cell(records, CellKey("drain", "guided", 8), 2.0)
    assert counted.request_throughput == pytest.approx(2.0)  # a drain: completed / duration
