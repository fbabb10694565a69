import pytest

from gate.measure.metrics import distribution_ms, level_ratios, summarize_cell, tpot_s
from gate.measure.results import CellKey, RequestRecord


def rec(index, ttft, e2el, tokens, itl=(), arm="guided", valid=True, finish="stop", status=200,
        error=None):
    return RequestRecord(
        index=index, phase="sweep", arm=arm, concurrency=2, send_s=0.0, ttft_s=ttft,
        e2el_s=e2el, output_tokens=tokens, itl_s=list(itl), finish_reason=finish,
        http_status=status, error=error, json_valid=valid if arm == "guided" else None,
    )


def test_tpot_is_vllm_definition():
    # (E2EL - TTFT) / (tokens - 1) = (1.1 - 0.1) / 10
    assert tpot_s(rec(0, 0.1, 1.1, 11)) == pytest.approx(0.1)
    assert tpot_s(rec(0, 0.1, 1.1, 1)) is None  # one token has no TPOT


def test_cell_summary_against_hand_computed_values():
    records = [
        rec(0, 0.10, 1.10, 11, itl=[0.1] * 10),
        rec(1, 0.20, 2.20, 11, itl=[0.2] * 10),
        rec(2, 0.30, 0.30, 0, error="HTTP 500: boom", status=500, valid=False),
    ]
    s = summarize_cell(records, CellKey("sweep", "guided", 2, 0), 4.0)
    assert (s.requests, s.completed, s.failed) == (3, 2, 1)
    assert s.total_output_tokens == 22
    assert s.request_throughput == pytest.approx(0.5)  # 2 completed / 4 s
    assert s.output_throughput == pytest.approx(5.5)  # 22 tokens / 4 s
    assert s.requests_per_min == pytest.approx(30.0)
    assert s.ttft_ms.p50 == pytest.approx(150.0)
    assert s.ttft_ms.mean == pytest.approx(150.0)
    assert s.tpot_ms.p50 == pytest.approx(150.0)  # tpots 100 and 200 ms
    assert s.tpot_ms.p99 == pytest.approx(199.0)  # numpy linear interpolation
    assert s.itl_ms.count == 20  # pooled over requests
    assert s.itl_ms.p50 == pytest.approx(150.0)
    assert s.e2el_ms.p90 == pytest.approx(2090.0)  # 1100 + 0.9 * (2200 - 1100)
    assert s.valid_outputs == 2 and s.invalid_outputs == 1


def test_length_finishes_counted():
    records = [rec(0, 0.1, 1.0, 10, finish="length"), rec(1, 0.1, 1.0, 10)]
    assert summarize_cell(records, CellKey("sweep", "guided", 2, 0), 1.0).length_finishes == 1


def test_distribution_std_is_population():
    d = distribution_ms([0.001, 0.003])
    assert d.std == pytest.approx(1.0) and d.mean == pytest.approx(2.0) and d.count == 2
    assert distribution_ms([]) is None


def test_level_ratios_pair_arms_per_level_and_repeat():
    guided = summarize_cell([rec(0, 0.1, 2.1, 11)], CellKey("sweep", "guided", 8, 0), 2.0)
    free = summarize_cell([rec(1, 0.1, 1.1, 11, arm="free")], CellKey("sweep", "free", 8, 0), 1.0)
    lonely = summarize_cell([rec(2, 0.1, 1.1, 11)], CellKey("sweep", "guided", 16, 0), 1.0)
    ratios = level_ratios([guided, free, lonely])
    assert len(ratios) == 1
    assert ratios[0].concurrency == 8
    assert ratios[0].tpot_p50_ratio == pytest.approx(2.0)
    assert ratios[0].output_throughput_ratio == pytest.approx(0.5)
