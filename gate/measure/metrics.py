"""Summaries of raw request records with `vllm bench serve`'s metric definitions
(docs/background.md#metric-definitions).

TTFT = send to first streamed token; TPOT = (E2EL - TTFT) / (output_tokens - 1) per request;
ITL = every gap between streamed chunks, pooled over requests; E2EL = send to last byte;
request throughput = completed / duration; output throughput = output tokens / duration.
Percentiles are numpy's default (linear interpolation), std is the population std, as in vLLM.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gate.measure import stream_integrity
from gate.measure.results import (
    CellKey,
    CellSummary,
    Distribution,
    LevelRatio,
    RequestRecord,
    is_guided,
)


def distribution_ms(values_s: Sequence[float]) -> Distribution | None:
    if not values_s:
        return None
    ms = np.asarray(values_s, dtype=float) * 1000.0
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return Distribution(
        mean=float(ms.mean()), std=float(ms.std()), p50=float(p50), p90=float(p90),
        p99=float(p99), count=int(ms.size),
    )


def tpot_s(record: RequestRecord) -> float | None:
    """(E2EL - TTFT) / (output tokens - 1): the one TPOT formula every figure uses."""
    if (
        record.ok
        and record.ttft_s is not None
        and record.e2el_s is not None
        and record.output_tokens is not None
        and record.output_tokens > 1
    ):
        return (record.e2el_s - record.ttft_s) / (record.output_tokens - 1)
    return None


def summarize_cell(records: Sequence[RequestRecord], key: CellKey, duration_s: float,
                   tokens_per_chunk: int = 1, tokens_in_window: float | None = None
                   ) -> CellSummary:
    """The cell's figures. Coalesced requests (gate.measure.stream_integrity) count in its throughput but
    never in its latency distributions: their TTFT, TPOT and gaps describe a held-back
    stream, not decoding.

    A windowed cell (`tokens_in_window` given) takes its throughput from the token flow: the
    output tokens every stream delivered inside the window over its length, and requests/s as
    that over the mean tokens per measured request. Counting whole requests instead would
    quantise the figure by the waves in which a closed loop's requests finish."""
    ok = [r for r in records if r.ok]
    tokens = sum(r.output_tokens or 0 for r in ok)
    held_back = {r.index for r in stream_integrity.coalesced(ok, tokens_per_chunk)}
    streamed = [r for r in ok if r.index not in held_back]
    tpots = [t for r in streamed if (t := tpot_s(r)) is not None]
    duration = max(duration_s, 1e-9)
    output_rate, request_rate = tokens / duration, len(ok) / duration
    if tokens_in_window is not None and tokens:
        output_rate = tokens_in_window / duration
        request_rate = output_rate / (tokens / len(ok))
    return CellSummary(
        phase=key.phase, arm=key.arm, concurrency=key.concurrency, repeat=key.repeat,
        requests=len(records), completed=len(ok), failed=len(records) - len(ok),
        duration_s=duration_s, total_output_tokens=tokens,
        request_throughput=request_rate, output_throughput=output_rate,
        ttft_ms=distribution_ms([r.ttft_s for r in streamed if r.ttft_s is not None]),
        tpot_ms=distribution_ms(tpots),
        itl_ms=distribution_ms([gap for r in streamed for gap in r.itl_s]),
        e2el_ms=distribution_ms([r.e2el_s for r in streamed if r.e2el_s is not None]),
        coalesced_requests=len(held_back),
        valid_outputs=sum(1 for r in ok if r.json_valid is True),
        invalid_outputs=sum(1 for r in records if is_guided(r.arm) and r.json_valid is not True),
        length_finishes=sum(1 for r in ok if r.finish_reason == "length"),
    )


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def _p50(dist: Distribution | None) -> float | None:
    return dist.p50 if dist is not None else None


def level_ratios(cells: Sequence[CellSummary]) -> list[LevelRatio]:
    """Guided (and unique-schema) over free per sweep level and repeat, where both arms were
    measured. The one place the ratios are computed; compare and report read them from
    results.ratios."""
    by_key = {c.key: c for c in cells if c.phase == "sweep"}
    out = []
    for conc, rep in sorted({(k.concurrency, k.repeat) for k in by_key}):
        guided = by_key.get(CellKey("sweep", "guided", conc, rep))
        unique = by_key.get(CellKey("sweep", "unique", conc, rep))
        free = by_key.get(CellKey("sweep", "free", conc, rep))
        if free is None or (guided is None and unique is None):
            continue
        out.append(LevelRatio(
            concurrency=conc, repeat=rep,
            tpot_p50_ratio=_ratio(_p50(guided.tpot_ms), _p50(free.tpot_ms)) if guided else None,
            output_throughput_ratio=_ratio(guided.output_throughput, free.output_throughput)
            if guided else None,
            ttft_p50_ratio=_ratio(_p50(guided.ttft_ms), _p50(free.ttft_ms)) if guided else None,
            unique_ttft_p50_ratio=_ratio(_p50(unique.ttft_ms), _p50(free.ttft_ms))
            if unique else None,
        ))
    return out

