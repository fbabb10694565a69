"""Thresholds of the checks `gate compare` applies, settable in a plan or on the command line.

Defaults are chosen so that a vLLM maintainer would accept them: a 10% loss of drain
throughput, a 10% rise of per-token latency at p50 (20% at p99, which is noisier), and an
absolute guided/free TPOT bound of 1.25 from concurrency 8 up (FACTS.md: healthy ~1.0 on GPUs,
the regression showed 1.5-6.7).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    drain_throughput_pct: float = Field(
        10.0, gt=0, description="fail when drain req/min or output tok/s drop by more than this %"
    )
    tpot_p50_pct: float = Field(10.0, gt=0, description="fail when TPOT p50 rises by more than this %")
    tpot_p99_pct: float = Field(20.0, gt=0, description="fail when TPOT p99 rises by more than this %")
    itl_p99_pct: float = Field(20.0, gt=0, description="fail when ITL p99 rises by more than this %")
    guided_free_tpot_ratio: float | None = Field(
        1.25,
        gt=0,
        description="absolute bound on guided/free TPOT p50 per level; null disables the check. "
        "Calibrate per hardware class: 1.25 suits GPUs, a CPU's healthy ratio is higher.",
    )
    ratio_min_concurrency: int = Field(8, ge=1, description="apply the ratio bound from this level up")
    validity_min: float = Field(1.0, ge=0, le=1, description="share of guided outputs that must validate")
    max_length_finishes: int = Field(0, ge=0, description="allowed finish_reason=length on guided requests")
    confidence: float = Field(0.95, gt=0.5, lt=1.0, description="confidence level of the intervals")
    run_noise_pct: float = Field(
        2.0,
        ge=0,
        description="run-to-run spread of one measurement (1 sigma, %) that resampling within a "
        "run cannot see; a floor on each side's interval width (docs/compare.md). GPU drain: "
        "about 0.2% (513 s +-1 s); a shared 2-core CPU: about 12.5% (+-25% between runs).",
    )
