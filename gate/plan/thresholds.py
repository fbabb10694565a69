"""Thresholds of the checks `gate compare` applies, settable in a plan or on the command line.

Defaults are chosen so that a vLLM maintainer would accept them: a 10% loss of drain
throughput, a 10% rise of per-token latency at p50 (20% at p99, which is noisier), and an
absolute guided/free TPOT bound of 1.25 from concurrency 8 up (healthy ~1.0 on GPUs, the
regression showed 1.5-6.7: docs/background.md#the-49013-regression). Time to first token of
guided requests, where grammar compilation and its cache show (TPOT barely moves), may rise by
25% at p50 and 50% at p90, and the wait a schema adds over a free request by 25%
(docs/compare.md#time-to-first-token-and-grammar-compilation).

A threshold means what it says: a 10% throughput threshold is a drop of 10% (head at 0.9x the
base), a 10% latency threshold a rise of 10%. An A/B fails when a change is past a threshold
(at most 1% of verdicts fail at any change up to the thresholds) and is built to fail a change
of 1.5x a threshold (docs/compare.md, "The sequential test").
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gate.core.errors import GateError
from gate.core.files import validation_problems

# Defaults of `run_noise_pct` by hardware kind (1 sigma, % of one measurement).
GPU_RUN_NOISE_PCT = 1.0
CPU_RUN_NOISE_PCT = 12.5


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    drain_throughput_pct: float = Field(
        10.0, gt=0, lt=66, description="fail when drain req/min drops by more than this % "
        "(1.5x it must stay a drop short of 100%)"
    )
    tpot_p50_pct: float = Field(10.0, gt=0, description="fail when TPOT p50 rises by more than this %")
    tpot_p99_pct: float | None = Field(
        20.0, gt=0, description="fail when TPOT p99 rises by more than this %; null: not judged"
    )
    itl_p99_pct: float | None = Field(
        20.0, gt=0, description="fail when ITL p99 rises by more than this %; null: not judged"
    )
    overhead_pct: float | None = Field(
        20.0, gt=0,
        description="A/B: fail when the structured-output overhead (guided/free TPOT p50 at a "
        "level, head's against base's in the same round) rises by more than this %; null: not "
        "judged",
    )
    ttft_p50_pct: float | None = Field(
        25.0, gt=0, description="fail when TTFT p50 of a guided arm (shared schemas: grammar "
        "cache hits; unique: misses) rises by more than this % at a level; null: not judged",
    )
    ttft_tail_pct: float | None = Field(
        50.0, gt=0, description="fail when TTFT p90 of a guided arm rises by more than this % "
        "at a level; null: not judged",
    )
    ttft_wait_pct: float | None = Field(
        25.0, gt=0, description="A/B: fail when the wait a schema adds before the first token "
        "(guided TTFT p50 over free TTFT p50 at a level, head's against base's in the same "
        "round) rises by more than this %; null: not judged",
    )
    ttft_wait_min_concurrency: int = Field(
        1, ge=1, description="the wait a schema adds (ttft_wait_pct) is judged from this level "
        "up: its ratio over the free arm's TTFT is noisy where few requests queue")
    spread_pct: float | None = Field(
        50.0, gt=0,
        description="A/B: fail when the head's round-to-round spread of a judged figure (its "
        "sd around its blocks' means) is more than this % above the base's: a jitter "
        "regression is the head's; null: not judged",
    )
    guided_free_tpot_ratio: float | None = Field(
        1.25,
        gt=0,
        description="absolute bound on guided/free TPOT p50 per level, judged when there is no "
        "base build (a stored baseline, or the head alone); null disables the check. Calibrate "
        "per hardware class: 1.25 suits GPUs, a CPU's healthy ratio is higher.",
    )
    ratio_min_concurrency: int = Field(8, ge=1, description="apply the ratio bound from this level up")
    validity_min: float = Field(1.0, ge=0, le=1, description="share of guided outputs that must validate")
    max_length_finishes: int = Field(0, ge=0, description="allowed finish_reason=length on guided requests")
    output_length_min_share: float | None = Field(
        0.5, gt=0, le=1,
        description="warn when the mean guided output is shorter than this share of the "
        "plan's workload.expected.output_tokens (the workload did not have its intended "
        "shape); null: not checked")
    confidence: float = Field(
        0.95, gt=0.5, lt=1.0,
        description="confidence level of the intervals, simultaneous over all judged checks",
    )
    run_noise_pct: float | None = Field(
        None,
        ge=0,
        description="the labelled fallback for a runner without a noise profile (gate "
        "calibrate): the spread of one measurement (1 sigma, %). null: "
        f"{GPU_RUN_NOISE_PCT:g} on GPU runs (5x the seed's drain repeatability, +-1 s of 513 s), "
        f"{CPU_RUN_NOISE_PCT:g} on CPU-only runs (+-25% between runs on a shared 2-core machine).",
    )

    def run_noise_for(self, on_gpu: bool) -> float:
        """The run-to-run floor in %, resolving null by the kind of hardware measured."""
        if self.run_noise_pct is not None:
            return self.run_noise_pct
        return GPU_RUN_NOISE_PCT if on_gpu else CPU_RUN_NOISE_PCT

    def with_overrides(self, overrides: dict[str, str]) -> Thresholds:
        """These thresholds with NAME=VALUE overrides applied (values as typed on a command
        line; null/none/off clears an optional one). A wrong name or value is a GateError."""
        data = self.model_dump()
        for name, value in overrides.items():
            if name not in Thresholds.model_fields:
                known = ", ".join(sorted(Thresholds.model_fields))
                raise GateError(f"unknown threshold {name!r}; known: {known}")
            data[name] = None if value.strip().lower() in ("null", "none", "off") else value
        try:
            return Thresholds.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(validation_problems(exc))
            raise GateError(f"invalid threshold override: {problems}") from None
