"""Build `Results` by hand for the compare/baseline/stats tests: cells with given figures per
repeat, optionally raw records, on a given GPU and plan."""

from __future__ import annotations

import numpy as np

from gate.fingerprint import Fingerprint, GpuInfo
from gate.plan import DrainSpec, Plan, ServerSpec, SweepSpec
from gate.results import CellSummary, Distribution, LevelRatio, RequestRecord, Results, ServerInfo

A100 = "NVIDIA A100-SXM4-80GB"


def gpu_plan(name: str = "a100-gemma4-26b", levels=(1, 8, 32), repeats: int = 1, **server) -> Plan:
    spec = {
        "model": "google/gemma-4-26B-A4B-it",
        "max_num_seqs": 64,
        "speculative_config": {"method": "ngram", "num_speculative_tokens": 5},
        **server,
    }
    return Plan(
        name=name,
        server=ServerSpec(**spec),
        drain=DrainSpec(requests=2000, concurrency=64),
        sweep=SweepSpec(levels=list(levels)),
        repeats=repeats,
    )


def dist(p50: float, p99: float | None = None, count: int = 100) -> Distribution:
    p99 = p99 if p99 is not None else p50 * 1.5
    return Distribution(mean=p50, std=p50 * 0.1, p50=p50, p90=(p50 + p99) / 2, p99=p99, count=count)


def cell(
    phase: str,
    arm: str,
    concurrency: int,
    repeat: int = 0,
    *,
    rpm: float = 233.0,
    tok_per_req: float = 200.0,
    tpot_p50: float = 20.0,
    tpot_p99: float | None = None,
    itl_p99: float | None = None,
    requests: int = 100,
    failed: int = 0,
    invalid: int = 0,
    length: int = 0,
    completed: int | None = None,
) -> CellSummary:
    completed = requests - failed if completed is None else completed
    rps = rpm / 60.0
    duration = completed / rps if rps > 0 and completed else 1.0
    guided = arm == "guided"
    return CellSummary(
        phase=phase, arm=arm, concurrency=concurrency, repeat=repeat, requests=requests,
        completed=completed, failed=failed, duration_s=duration,
        total_output_tokens=int(completed * tok_per_req), request_throughput=rps,
        output_throughput=rps * tok_per_req,
        ttft_ms=dist(50.0), tpot_ms=dist(tpot_p50, tpot_p99), itl_ms=dist(tpot_p50, itl_p99 or tpot_p50 * 2),
        e2el_ms=dist(tpot_p50 * tok_per_req),
        valid_outputs=(completed - invalid) if guided else 0, invalid_outputs=invalid if guided else 0,
        length_finishes=length if guided else 0,
    )


def fingerprint(gpu: str = A100, count: int = 1) -> Fingerprint:
    return Fingerprint(
        cpu_model="test cpu", host_cores=64, gpus=[GpuInfo(name=gpu)] * count,
        versions={"vllm": "0.21.0"},
    )


def make_results(
    cells: list[CellSummary],
    *,
    plan: Plan | None = None,
    gpu: str = A100,
    records: list[RequestRecord] | None = None,
    status: str = "complete",
    errors: list[str] | None = None,
    label: str = "head",
) -> Results:
    plan = plan or gpu_plan(repeats=1 + max([c.repeat for c in cells] + [0]))
    ratios = []
    for g in cells:
        f = next((c for c in cells if (c.phase, c.arm, c.concurrency, c.repeat) == ("sweep", "free", g.concurrency, g.repeat)), None)
        if g.phase == "sweep" and g.arm == "guided" and f is not None:
            ratios.append(LevelRatio(concurrency=g.concurrency, repeat=g.repeat,
                                     tpot_p50_ratio=g.tpot_ms.p50 / f.tpot_ms.p50,
                                     output_throughput_ratio=g.output_throughput / f.output_throughput))
    return Results(
        label=label, created_at="2025-01-01T00:00:00Z", plan=plan, plan_hash=plan.measurement_hash(),
        fingerprint=fingerprint(gpu),
        server=ServerInfo(base_url="http://127.0.0.1:8000", started_by_gate=True, model="gate-model"),
        status=status, errors=errors or [], cells=cells, ratios=ratios, records=records or [],
    )


def drain_results(rpm_values, tok_per_req: float = 200.0, **kw) -> Results:
    """Results holding only the guided drain, one cell per repeat with the given req/min."""
    cells = [cell("drain", "guided", 64, r, rpm=v, tok_per_req=tok_per_req) for r, v in enumerate(rpm_values)]
    return make_results(cells, **kw)


def ratio_results(guided_p50: float, free_p50: float, levels=(1, 8, 32), repeats: int = 1) -> Results:
    """Sweep only: guided TPOT p50 = guided_p50 from level 8 up (free_p50 at level 1)."""
    cells = []
    for r in range(repeats):
        for level in levels:
            g = guided_p50 if level >= 8 else free_p50
            cells += [cell("sweep", "guided", level, r, tpot_p50=g), cell("sweep", "free", level, r, tpot_p50=free_p50)]
    return make_results(cells, plan=gpu_plan(levels=levels, repeats=repeats))


def records_for(
    phase: str, arm: str, concurrency: int, n: int, *, repeat: int = 0, tpot_s: float = 0.02,
    tokens: int = 64, seed: int = 0, spread: float = 0.1, json_valid: bool | None = True,
) -> list[RequestRecord]:
    """n records whose per-token gaps scatter around tpot_s (log-normal, `spread` sigma)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        gaps = list(tpot_s * np.exp(rng.normal(0, spread, tokens - 1)))
        ttft = 0.05
        out.append(RequestRecord(
            index=i, phase=phase, arm=arm, concurrency=concurrency, repeat=repeat, send_s=0.0,
            ttft_s=ttft, itl_s=gaps, e2el_s=ttft + sum(gaps), output_tokens=tokens,
            finish_reason="stop", http_status=200, json_valid=json_valid if arm == "guided" else None,
        ))
    return out
