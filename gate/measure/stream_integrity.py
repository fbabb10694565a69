"""Stream integrity: did a response really stream, token by token?

A healthy streamed response delivers its tokens as they are decoded: about one arrival per
token (up to 1 + num_speculative_tokens tokens per arrival with speculative decoding). A
coalesced response arrived in one or a few bursts, all its chunks read at once: its output was
held back on the way, so its time to first token is about its end-to-end latency and its
inter-token gaps are zero. Such a request says nothing about TPOT or
ITL, and a cell full of them measured something else (see docs/background.md#coalesced-streams).

Pure functions: the records in, the verdict on them out.
"""

from __future__ import annotations

from collections.abc import Sequence

from gate.measure.results import RequestRecord

# Requests shorter than this cannot be told apart: too few tokens to expect many chunks.
MIN_TOKENS = 4
# A stream is coalesced when it delivered fewer than 1/SLACK of the chunks it should have.
SLACK = 2.0


def is_coalesced(record: RequestRecord, tokens_per_chunk: int) -> bool:
    """Far fewer arrivals than tokens: fewer than tokens / (tokens_per_chunk x SLACK)."""
    tokens = record.output_tokens
    if not record.ok or record.deliveries is None or tokens is None or tokens < MIN_TOKENS:
        return False
    return record.deliveries * tokens_per_chunk * SLACK < tokens


def coalesced(records: Sequence[RequestRecord], tokens_per_chunk: int) -> list[RequestRecord]:
    return [r for r in records if is_coalesced(r, tokens_per_chunk)]


def describe(records: Sequence[RequestRecord], tokens_per_chunk: int) -> str:
    """What the coalesced requests of a cell looked like, for an error message."""
    bad = coalesced(records, tokens_per_chunk)
    if not bad:
        return "no coalesced requests"
    first = bad[0]
    ttft = (first.ttft_s or 0.0) * 1000
    e2el = (first.e2el_s or 0.0) * 1000
    return (f"{len(bad)} of {len(records)} requests arrived coalesced (e.g. request "
            f"{first.index}: {first.output_tokens} tokens in {first.deliveries} arrival(s), TTFT "
            f"{ttft:.1f} ms vs E2EL {e2el:.1f} ms)")
