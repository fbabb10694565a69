"""vLLM's own view of where a request's time to first token went: its Prometheus histograms
(`GET /metrics`), read before and after a cell so that their difference covers the requests
of that cell alone (a session measures one cell at a time).

- `vllm:request_queue_time_seconds`: from the request entering the scheduler's queue to its
  first scheduling. A guided request is held there, in WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR,
  until its grammar is compiled, so a compile regression shows here and a free request
  measures the wait for capacity alone (docs/compare.md#where-the-wait-is).
- `vllm:request_prefill_time_seconds`: first scheduled to first token.
- `vllm:time_to_first_token_seconds`: the server's own TTFT.

A server that does not expose them (stats disabled, another server) gives None, never an error:
these are evidence, not the measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

import requests
from prometheus_client.parser import text_string_to_metric_families

from gate.measure.results import ServerTimes

HISTOGRAMS = {
    "queue_ms": "vllm:request_queue_time_seconds",
    "prefill_ms": "vllm:request_prefill_time_seconds",
    "ttft_ms": "vllm:time_to_first_token_seconds",
}
SCRAPE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Totals:
    """Each histogram's (sum of seconds, count) summed over its label sets."""

    values: dict[str, tuple[float, float]]


def parse(text: str) -> Totals:
    wanted = {name: field for field, name in HISTOGRAMS.items()}
    values: dict[str, tuple[float, float]] = {}
    for family in text_string_to_metric_families(text):
        field = wanted.get(family.name)
        if field is None:
            continue
        total = count = 0.0
        for sample in family.samples:
            if sample.name.endswith("_sum"):
                total += sample.value
            elif sample.name.endswith("_count"):
                count += sample.value
        values[field] = (total, count)
    return Totals(values)


def scrape(base_url: str) -> Totals | None:
    """The histograms now; None when the server does not answer /metrics with them."""
    try:
        resp = requests.get(f"{base_url.rstrip('/')}/metrics", timeout=SCRAPE_TIMEOUT_S)
        if resp.status_code != 200:
            return None
        totals = parse(resp.text)
    except (requests.RequestException, ValueError):
        return None
    return totals if totals.values else None


def difference(before: Totals | None, after: Totals | None) -> ServerTimes | None:
    """Mean per request of each histogram over the requests counted between two scrapes."""
    if before is None or after is None:
        return None
    means: dict[str, float | None] = {}
    counted = 0
    for field in HISTOGRAMS:
        s0, n0 = before.values.get(field, (0.0, 0.0))
        s1, n1 = after.values.get(field, (0.0, 0.0))
        n = n1 - n0
        means[field] = (s1 - s0) / n * 1000.0 if n > 0 else None
        counted = max(counted, int(n))
    if not counted:
        return None
    return ServerTimes(requests=counted, **means)
