"""Where the wait before the first token is: for each guided arm and level, the client's TTFT
split by vLLM's own histograms (gate.measure.server_metrics) into the wait in the scheduler's
queue and the prefill, and the queue wait set against the free arm's at the same level.

A guided request is held in the queue until its grammar is compiled; a free request waits
there only for capacity. So (guided queue - free queue) is the wait for the grammar, and a
TTFT that grew by about that much grew because requests wait for their grammar: compilation
or its cache, not decoding, which a CPU profile of the busy threads does not see
(docs/compare.md#where-the-wait-is). Pure functions over results.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from gate.measure.results import CellSummary, Results

ARM_WORDS = {"guided": "guided", "unique": "unique schemas (cache miss)"}
# A cause is named when it explains at least this share of the added TTFT; an added TTFT
# under MATERIAL_MS or MATERIAL_SHARE of the base's is not looked into (noise).
EXPLAINS = 0.5
MATERIAL_MS = 5.0
MATERIAL_SHARE = 0.10


@dataclass(frozen=True)
class ArmWait:
    """One build's figures for a guided arm at a level: medians over repeats, ms."""

    ttft_ms: float | None
    queue_ms: float | None
    prefill_ms: float | None
    free_queue_ms: float | None
    tpot_ms: float | None = None  # the same cells' time per output token: one engine step

    @property
    def grammar_wait_ms(self) -> float | None:
        """The wait in the queue beyond a free request's: the wait for the grammar."""
        if self.queue_ms is None or self.free_queue_ms is None:
            return None
        return self.queue_ms - self.free_queue_ms


@dataclass(frozen=True, kw_only=True)
class WaitRow:
    arm: str
    concurrency: int
    head: ArmWait
    base: ArmWait | None
    cause: str  # what the added TTFT is, in words ("" when nothing was added or nothing known)

    @property
    def label(self) -> str:
        return f"{ARM_WORDS.get(self.arm, self.arm)}, c={self.concurrency}"

    @property
    def added_ttft_ms(self) -> float | None:
        if self.base is None or self.head.ttft_ms is None or self.base.ttft_ms is None:
            return None
        return self.head.ttft_ms - self.base.ttft_ms


def _med(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return median(present) if present else None


def _server(cells: list[CellSummary], field: str) -> float | None:
    return _med([getattr(c.server_times, field) if c.server_times else None for c in cells])


def arm_wait(results: Results, arm: str, level: int) -> ArmWait:
    cells = results.cells_of("sweep", arm, level)
    free = results.cells_of("sweep", "free", level)
    return ArmWait(
        ttft_ms=_med([c.ttft_ms.p50 if c.ttft_ms else None for c in cells]),
        queue_ms=_server(cells, "queue_ms"), prefill_ms=_server(cells, "prefill_ms"),
        free_queue_ms=_server(free, "queue_ms"),
        tpot_ms=_med([c.tpot_ms.p50 if c.tpot_ms else None for c in cells]))


def _relative(head: float | None, base: float | None) -> float | None:
    return head / base - 1 if head is not None and base else None


def _delta(head: float | None, base: float | None) -> float | None:
    return head - base if head is not None and base is not None else None


def cause(head: ArmWait, base: ArmWait | None) -> str:
    """What the TTFT that head added over base is spent on, by vLLM's histograms."""
    if base is None:
        wait = head.grammar_wait_ms
        return "" if wait is None else f"requests wait {wait:.0f} ms for their grammar"
    added = _delta(head.ttft_ms, base.ttft_ms)
    if added is None or base.ttft_ms is None or \
            added <= max(MATERIAL_MS, MATERIAL_SHARE * base.ttft_ms):
        return ""
    grammar = _delta(head.grammar_wait_ms, base.grammar_wait_ms)
    prefill = _delta(head.prefill_ms, base.prefill_ms)
    queue = _delta(head.queue_ms, base.queue_ms)
    if grammar is not None and grammar >= EXPLAINS * added:
        return (f"waiting for the grammar: +{grammar:.0f} ms of the +{added:.0f} ms is time "
                "held in vLLM's queue beyond a free request's (grammar compilation or its "
                "cache), not decoding")
    if prefill is not None and prefill >= EXPLAINS * added:
        return f"prefill: +{prefill:.0f} ms of the +{added:.0f} ms is the first step"
    if queue is not None and queue >= EXPLAINS * added:
        return (f"queueing for capacity: +{queue:.0f} ms of the +{added:.0f} ms, free "
                "requests wait as much (slower steps, not the grammar)")
    steps = _relative(head.tpot_ms, base.tpot_ms)
    if steps is not None and base.ttft_ms > 0 and steps >= EXPLAINS * added / base.ttft_ms:
        # A request's first token comes out of an engine step shared with the requests in
        # flight: a slower step delays it as much as every later token.
        return (f"slower engine steps: TPOT p50 {steps:+.0%} in the same cells against TTFT "
                f"{added / base.ttft_ms:+.0%}; the first token waits on the steps, not on "
                "the grammar")
    if head.queue_ms is None:
        return "not attributed: the server's /metrics gave no queue or prefill times"
    return "not attributed: neither the queue nor the prefill explains it"


def wait_rows(head: Results, base: Results | None) -> list[WaitRow]:
    """One row per guided arm and sweep level that both arms (and the base) measured."""
    rows = []
    for arm in ARM_WORDS:
        for level in sorted({c.concurrency for c in head.cells_of("sweep", arm)}):
            h = arm_wait(head, arm, level)
            b = arm_wait(base, arm, level) if base is not None else None
            rows.append(WaitRow(arm=arm, concurrency=level, head=h, base=b, cause=cause(h, b)))
    return rows


def findings(rows: list[WaitRow]) -> list[str]:
    """One line per arm and level whose TTFT grew, naming where the added time went."""
    out = []
    for row in rows:
        added = row.added_ttft_ms
        if added is not None and added > 0 and row.cause:
            out.append(f"TTFT p50 ({row.label}) +{added:.0f} ms: {row.cause}")
    return out
