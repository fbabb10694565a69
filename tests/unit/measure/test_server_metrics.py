"""vLLM's /metrics histograms read around a cell: sums and counts over label sets, and the
per-request means of their difference."""

from __future__ import annotations

from gate.measure.server_metrics import Totals, difference, parse


def exposition(queue_sum: float, queue_n: int, prefill_sum: float, ttft_sum: float) -> str:
    """/metrics as vLLM's Prometheus logger writes it (two engines for the queue)."""
    lines = []
    for name, total, n in (("vllm:request_queue_time_seconds", queue_sum, queue_n),
                           ("vllm:request_prefill_time_seconds", prefill_sum, queue_n),
                           ("vllm:time_to_first_token_seconds", ttft_sum, queue_n)):
        lines += [f"# HELP {name} Histogram.", f"# TYPE {name} histogram"]
        for engine, share in (("0", 0.75), ("1", 0.25)):
            labels = f'engine="{engine}",model_name="gate-model"'
            lines += [f'{name}_bucket{{{labels},le="0.3"}} 1.0',
                      f'{name}_bucket{{{labels},le="+Inf"}} {n * share}',
                      f"{name}_count{{{labels}}} {n * share}",
                      f"{name}_sum{{{labels}}} {total * share}"]
    lines += ["# HELP vllm:num_requests_running Running.", "# TYPE vllm:num_requests_running gauge",
              'vllm:num_requests_running{engine="0",model_name="gate-model"} 3.0']
    return "\n".join(lines) + "\n"


def test_parse_sums_each_histogram_over_its_label_sets():
    totals = parse(exposition(2.0, 8, 0.4, 2.6))
    assert totals.values["queue_ms"] == (2.0, 8.0)
    assert totals.values["prefill_ms"] == (0.4, 8.0)
    assert totals.values["ttft_ms"] == (2.6, 8.0)


def test_difference_is_the_mean_per_request_over_the_cell():
    before, after = parse(exposition(2.0, 8, 0.4, 2.6)), parse(exposition(6.0, 12, 0.44, 7.0))
    times = difference(before, after)
    assert times is not None and times.requests == 4
    assert times.queue_ms == 1000.0  # 4 s over 4 requests
    assert round(times.prefill_ms, 6) == 10.0 and times.ttft_ms == 1100.0


def test_no_figures_when_a_scrape_is_missing_or_nothing_finished():
    totals = parse(exposition(2.0, 8, 0.4, 2.6))
    assert difference(None, totals) is None and difference(totals, None) is None
    assert difference(totals, totals) is None
    assert parse("# nothing here\n") == Totals({})
