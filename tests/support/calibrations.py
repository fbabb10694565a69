"""Noise calibrations for tests: runs whose spreads are exactly what a test asks for (block
means and rounds standardised to the given sd), keyed to a results' plan and runner."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from gate.judge import sequential as seq
from gate.judge.checks import planned_slots
from gate.judge.noise import (
    CalibrationCost,
    CalibrationDesign,
    CalibrationKey,
    CalibrationRun,
    CheckNoise,
    Noise,
    NoiseCalibration,
    NoiseProvenance,
    runner_key,
    store_run,
)
from gate.judge.sizing import Spread
from gate.measure.results import Results
from gate.plan.spec import load_plan
from support.factories import cell, make_results

CPU_SMOKE = load_plan("cpu-smoke")
# every check cpu-smoke judges: its drain, TPOT p50 per level, TTFT and the overheads
CPU_SMOKE_CHECKS = tuple(s.name for s in planned_slots(CPU_SMOKE, CPU_SMOKE.thresholds))

PROVENANCE = NoiseProvenance(date="2026-11-30", gate_version="0.1.0", runner="test runner",
                             command="gate calibrate --blocks 10")
DRAIN_AND_C8 = ("drain.req_per_min", "drain.output_tok_s", "sweep.c8.tpot_p50_ms",
                "sweep.c8.tpot_p99_ms", "sweep.c8.itl_p99_ms", "ratio.c8.tpot_p50",
                "sweep.c8.ttft_p50_ms", "sweep.c8.ttft_p90_ms", "ratio.c8.ttft_p50")


def exact(n: int, sd: float, seed: int) -> list[float]:
    """n values with mean 0 and sample sd exactly `sd` (n - 1 in the denominator)."""
    z = np.random.default_rng(seed).standard_normal(n)
    z = (z - z.mean()) / z.std(ddof=1)
    return [float(v) for v in z * sd]


def check_noise(between: float, within: float, blocks: int = 10, rounds_per_block: int = 2,
                seed: int = 0, unit: str = "") -> CheckNoise:
    """A check whose block means spread like `between` offsets plus `within` round noise."""
    block_sd = math.sqrt(between**2 + within**2 / rounds_per_block)
    df = blocks * (rounds_per_block - 1)
    return CheckNoise(unit=unit, block_means=exact(blocks, block_sd, seed), within_sd=within,
                      within_df=df, sigma_single=math.hypot(between, within),
                      single_df=blocks * rounds_per_block - 1)


def calibration_run(names=DRAIN_AND_C8, between: float = 0.01, within: float = 0.02,
                    blocks: int = 10, rounds_per_block: int = 2, servers: str = "persistent",
                    cost: CalibrationCost | None = None, date: str = "2026-11-30"
                    ) -> CalibrationRun:
    checks = {name: check_noise(between, within, blocks, rounds_per_block, seed=i)
              for i, name in enumerate(names)}
    return CalibrationRun(
        provenance=PROVENANCE.model_copy(update={"date": date}),
        design=CalibrationDesign(servers=servers, rounds_per_block=rounds_per_block),
        cost=cost or CalibrationCost(pair_s=60.0, round_s=90.0), checks=checks)


def key_of(results: Results) -> CalibrationKey:
    return CalibrationKey(plan=results.plan.name, plan_hash=results.plan_hash,
                          runner_key=runner_key(results.fingerprint))


def calibration_for(results: Results, *runs: CalibrationRun, **kw) -> NoiseCalibration:
    """A calibration that applies to `results` (its plan, hash and runner)."""
    if not runs:
        design = results.plan.ab
        kw.setdefault("rounds_per_block", design.rounds_per_block)
        kw.setdefault("servers", design.servers)
        runs = (calibration_run(**kw),)
    return NoiseCalibration(**key_of(results).model_dump(), runs=list(runs))


def noise_for_results(results: Results, **kw) -> Noise:
    return Noise((calibration_for(results, **kw),), "test calibration")


def store_for(directory: Path, results: Results, **kw) -> Path:
    """Store a calibration for `results` in `directory`, as gate calibrate would."""
    design = results.plan.ab
    kw.setdefault("rounds_per_block", design.rounds_per_block)
    kw.setdefault("servers", design.servers)
    return store_run(directory, key_of(results), calibration_run(**kw))


def cpu_smoke_results(levels=(4, 8)) -> Results:
    """Results of the cpu-smoke plan's cells (drain, and both arms of each sweep level)."""
    cells = [cell("drain", "guided", 8)]
    for level in levels:
        cells += [cell("sweep", "guided", level), cell("sweep", "free", level)]
    return make_results(cells, plan=CPU_SMOKE, gpu=None)


def specs_and_spreads(between: float, within: float, k: int = 3, size_: int = 2
                      ) -> tuple[list[seq.CheckSpec], list[Spread]]:
    """`k` checks at a 10% threshold, each with this calibrated spread (9 df)."""
    spread = Spread(between, within)
    prior = seq.Prior(block_sd=spread.block_sd(size_), block_df=9, within_sd=within,
                      within_df=9)
    specs = [seq.CheckSpec(f"c{i}", 10.0, seq.LOWER, prior) for i in range(k)]
    return specs, [spread] * k
