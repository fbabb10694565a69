"""Noise calibrations: the measured spread of `gate ab`'s paired figures on one runner class,
between server pairs and between rounds (docs/compare.md, "Calibrations").

`gate calibrate` runs A/A blocks: the same build on both sides, B rounds per block on one pair
of freshly started servers, a new pair for every block. Per check it stores the mean of
d = log(head / base) of every block (their spread is the spread of a block's mean, the unit of
the sequential test, between-server offsets included), the spread of d around its block's
mean (round to round on one pair), and one build's own round-to-round spread on one server
(`side_within_sd`: the runner's noise, which a head build cannot move). One YAML file per
(plan, runner key), read from every folder the gate looks in (baselines/noise/ and the cache
folder):

    schema_version: 3
    plan: cpu-smoke
    plan_hash: 3f2a...                    # Plan.measurement_hash(): cells, levels, server
    runner_key: 'cpu: AMD EPYC 7B13; cpus 2; quota none'   # runner_key(), exact or a pattern
    runs:                                 # calibration runs of this plan hash, newest first
    - provenance: {date, gate_version, runner, command, note}
      design: {servers: persistent, rounds_per_block: 2}
      cost: {pair_s: 70.0, round_s: 65.0}   # runner seconds: a server pair's life, a round
      checks:
        drain.req_per_min: {unit: req/min, block_means: [0.01, -0.02, ...], within_sd: 0.03,
                            within_df: 6, side_within_sd: 0.02, side_within_df: 12,
                            sigma_single: 0.04, single_df: 11}
    history: [{plan_hash, run}, ...]      # runs of earlier plan hashes, not used

Runs pool, newest first, until their block means have ENOUGH_BLOCK_DF degrees of freedom, so
short calibrations (a runner calibrating itself before its first A/B) add up, and a trusted
run added later (`gate calibrate --add`) takes the place of the oldest. Block means are
centred on their own run's mean. Matching never guesses: a calibration applies only when plan
name, plan hash and runner key agree; the lookup names for every other file what did not
match. Schema v1 files (one spread per check, measured on one server pair) are read as one
block without a between-server spread; v2 files are v3 without the one-build spread. A run
may hold only one build's spreads (the base side of an A/B whose base is a trusted build):
`block_means` is then empty.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator
from scipy import special

from gate import __version__
from gate.core.errors import GateError, MeasurementError
from gate.core.files import load_yaml_mapping, validate
from gate.core.store import StrictModel, record_files, slug, today, write_record
from gate.judge.noise_guard import newest_first, run_day
from gate.judge.sequential import Prior, RoundPair, ucb_factor, whole_blocks
from gate.judge.sizing import RunnerCost, Spread
from gate.runner.fingerprint import Fingerprint

NOISE_SCHEMA_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
MAX_RUNS = 20
MAX_HISTORY = 20
ENOUGH_BLOCK_DF = 9
DEFAULT_NOISE_DIR = Path("baselines") / "noise"
# Degrees of freedom the labelled fallback constant is worth in baseline mode and for the
# guided/free bound when no calibration applies (the A/B never uses it).
FALLBACK_PRIOR_DF = 4.0


class CheckNoise(StrictModel):
    """One check in one calibration run."""

    unit: str = Field("", description="unit of the figure (req/min, ms, x)")
    block_means: list[float] = Field(
        default_factory=list, description="mean d per block (server pair); empty: a run of "
        "one build's spreads only")
    within_sd: float | None = Field(None, gt=0, description="sd of d around its block's mean")
    within_df: int = Field(0, ge=0)
    side_within_sd: float | None = Field(
        None, gt=0, description="sd of one build's log(figure) around its block's mean: one "
        "server, round to round")
    side_within_df: int = Field(0, ge=0)
    sigma_single: float | None = Field(
        None, gt=0, description="sd of log(figure) on one side: the prior of baseline mode")
    single_df: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _something_measured(self) -> CheckNoise:
        if not self.block_means and self.side_within_sd is None:
            raise ValueError("a check needs block means or a one-build spread")
        return self


class CalibrationDesign(StrictModel):
    servers: Literal["persistent", "per_round"]
    rounds_per_block: int = Field(ge=1)
    isolation: Literal["shared", "paused", "split"] = Field(
        "shared", description="plan ab.isolation: how the idle server was kept out of the way")


class CalibrationCost(StrictModel):
    pair_s: float = Field(gt=0, description="runner s to start, warm up and stop both servers")
    round_s: float = Field(gt=0, description="runner s of one round of both builds")


class NoiseProvenance(StrictModel):
    date: str = Field(description="ISO date of the calibration, not after today (noise_guard)")
    gate_version: str = Field(description="gate version that measured it")
    runner: str = Field("", description="fingerprint summary: cores, quota, threads, versions")
    command: str = Field("", description="the command that measured it")
    note: str = ""

    @field_validator("date")
    @classmethod
    def _a_real_past_date(cls, value: str) -> str:
        run_day(value)  # runs pool newest first: a date must be one
        return value


class CalibrationRun(StrictModel):
    provenance: NoiseProvenance
    design: CalibrationDesign
    cost: CalibrationCost | None = None
    checks: dict[str, CheckNoise] = Field(min_length=1)


class HistoryRun(StrictModel):
    plan_hash: str
    run: CalibrationRun


class CalibrationKey(StrictModel):
    plan: str = Field(description="plan name")
    plan_hash: str = Field(description="Plan.measurement_hash() of the calibrated plan")
    runner_key: str = Field(description="runner_key() of the runner, or an fnmatch pattern")


class NoiseCalibration(CalibrationKey):
    schema_version: int = NOISE_SCHEMA_VERSION
    runs: list[CalibrationRun] = Field(min_length=1, description="newest first")
    history: list[HistoryRun] = Field(default_factory=list)

    @property
    def identity(self) -> CalibrationKey:
        return CalibrationKey(plan=self.plan, plan_hash=self.plan_hash, runner_key=self.runner_key)


def runner_key(fp: Fingerprint) -> str:
    """What a calibration is matched on: what changes noise. The accelerators (name, count,
    memory) or the CPU model, and the CPUs the server may use (affinity mask, quota)."""
    quota = fp.cpu_quota.quota_cpus
    cpus = (f"cpus {fp.affinity_cpus or fp.host_cores}; "
            f"quota {'none' if quota is None else f'{quota:g}'}")
    if fp.gpus:
        names = " + ".join(sorted({g.name for g in fp.gpus}))
        memory = sorted({g.memory_total_mib for g in fp.gpus if g.memory_total_mib})
        mib = f" {'/'.join(str(m) for m in memory)} MiB" if memory else ""
        return f"gpu: {len(fp.gpus)}x {names}{mib}; {cpus}"
    return f"cpu: {fp.cpu_model or 'unknown'}; {cpus}"


# ---------------------------------------------------------------- pooling


@dataclass(frozen=True, kw_only=True)
class PooledCheck:
    """One check's calibration runs pooled for one A/B design."""

    name: str
    design: CalibrationDesign
    block_var: float | None  # variance of one block's mean d
    block_df: int
    within_var: float | None
    within_df: int
    sigma_single: float | None
    single_df: int
    runs: int
    blocks: int
    side_within_var: float | None = None  # one build's round-to-round variance on one server
    side_within_df: int = 0

    @property
    def between_var(self) -> float:
        """The server pairs' offsets: what a block's mean varies beyond its rounds."""
        if self.block_var is None:
            return math.nan
        if self.design.servers == "per_round":
            return self.block_var * self.design.rounds_per_block
        if self.within_var is None:
            return self.block_var
        return max(self.block_var - self.within_var / self.design.rounds_per_block, 0.0)

    @property
    def block_var_at_least_rounds(self) -> float | None:
        """The variance of a block's mean, never below what its rounds imply (within^2 / B:
        between-pair variance is not negative). Block means can scatter less by chance; taken
        raw, such a low estimate makes the test bolder than the runner is noisy."""
        if self.block_var is None:
            return None
        return max(self.block_var, (self.within_var or 0.0) / self.design.rounds_per_block)

    def spread(self) -> Spread | None:
        """The noise to simulate (point estimates), when the blocks measured any."""
        if self.block_var is None or self.block_df < 1:
            return None
        if self.design.servers == "per_round":
            floored = self.block_var_at_least_rounds or 0.0
            return Spread(0.0, math.sqrt(floored * self.design.rounds_per_block))
        return Spread(math.sqrt(self.between_var), math.sqrt(self.within_var or 0.0))

    def spread_ucb(self) -> Spread | None:
        """The spread taken at the upper confidence bound of the blocks behind it: what gate ab
        sizes its design by, so that a calibration that came out low does not cut it short."""
        spread = self.spread()
        if spread is None:
            return None
        f = ucb_factor(self.block_df)
        return Spread(spread.between * f, spread.within * f)

    def prior(self, source: str, rounds_per_block: int | None = None) -> Prior | None:
        """The test's prior for blocks of `rounds_per_block` rounds (default: the calibrated
        design's; another size is derived from the two spreads, worth no more degrees of
        freedom than either)."""
        spread = self.spread()
        if spread is None or self.block_var is None:
            return None
        size = rounds_per_block or self.design.rounds_per_block
        block_var, block_df = self.block_var_at_least_rounds or 0.0, self.block_df
        if size != self.design.rounds_per_block:
            if self.design.servers == "per_round":
                block_var = (spread.between**2 + spread.within**2) / size
            else:
                block_var = spread.between**2 + spread.within**2 / size
            block_df = min(self.block_df, self.within_df or self.block_df)
        if not block_var > 0:
            return None
        side = self.side_within_var if self.side_within_var and self.side_within_df else None
        return Prior(block_sd=math.sqrt(block_var), block_df=block_df,
                     within_sd=math.sqrt(self.within_var) if self.within_var else None,
                     within_df=self.within_df if self.within_var else 0,
                     side_within_sd=math.sqrt(side) if side else None,
                     side_within_df=self.side_within_df if side else 0, source=source)


def pool(runs: Iterable[CalibrationRun], name: str, design: CalibrationDesign) -> PooledCheck:
    """Pool the runs (newest first) that measured `name` with this design (servers and rounds
    per block) until their block means have ENOUGH_BLOCK_DF degrees of freedom: block means
    centred on their own run's mean, round-to-round spreads of the same runs with them (a
    spread of rounds over a block of 12 holds drift that a block of 2 does not)."""
    block_ss = within_ss = side_ss = 0.0
    block_df = within_df = side_df = used = blocks = 0
    single, single_df = None, 0
    for run in runs:
        c = run.checks.get(name)
        if c is None or run.design != design:
            continue
        if single is None and c.sigma_single is not None:
            single, single_df = c.sigma_single, c.single_df
        if c.side_within_sd is not None and c.side_within_df:
            side_ss, side_df = side_ss + c.side_within_df * c.side_within_sd**2, \
                side_df + c.side_within_df
        if c.within_sd is not None and c.within_df:
            within_ss, within_df = within_ss + c.within_df * c.within_sd**2, within_df + c.within_df
        if len(c.block_means) < 2:
            continue
        m = np.asarray(c.block_means)
        block_ss += float(((m - m.mean()) ** 2).sum())
        block_df, blocks, used = block_df + m.size - 1, blocks + m.size, used + 1
        if block_df >= ENOUGH_BLOCK_DF:
            break
    return PooledCheck(name=name, design=design,
                       block_var=block_ss / block_df if block_df else None, block_df=block_df,
                       within_var=within_ss / within_df if within_df else None,
                       within_df=within_df, sigma_single=single, single_df=single_df, runs=used,
                       blocks=blocks, side_within_var=side_ss / side_df if side_df else None,
                       side_within_df=side_df)


# ---------------------------------------------------------------- what applies to a run


@dataclass(frozen=True)
class Noise:
    """The calibrations that apply to a run (pooled, newest run first), and why (for people)."""

    calibrations: tuple[NoiseCalibration, ...] = ()
    description: str = "no calibration given"

    def runs(self) -> list[CalibrationRun]:
        return newest_first(run for c in self.calibrations for run in c.runs)

    def pooled(self, name: str, design: CalibrationDesign) -> PooledCheck:
        return pool(self.runs(), name, design)

    def prior(self, name: str, design: CalibrationDesign, rounds_per_block: int | None = None
              ) -> Prior | None:
        """The sequential test's prior for `name`, pooled from the runs of `design`, for blocks
        of `rounds_per_block` rounds (default: the design's)."""
        p = self.pooled(name, design)
        return p.prior(f"calibration: {p.blocks} blocks of {design.rounds_per_block} rounds "
                       f"from {p.runs} run(s) ({self.description})", rounds_per_block)

    def cost(self, design: CalibrationDesign) -> RunnerCost | None:
        """The newest measured cost of this design's parts."""
        for run in self.runs():
            if run.cost and run.design.servers == design.servers:
                return RunnerCost(run.cost.pair_s, run.cost.round_s, design.servers == "per_round")
        return None


@dataclass(frozen=True)
class SinglePrior:
    """The spread of one measurement (baseline mode, the bound) and where it came from."""

    sigma: float
    df: float
    source: str


def fallback_prior(run_noise_pct: float, paired: bool = True, why: str = "no calibration"
                   ) -> SinglePrior:
    """The labelled constant (Thresholds.run_noise_pct: 1 sigma of ONE measurement, %); two
    measurements behind one figure (a ratio): sqrt(2) times that."""
    one = math.log1p(run_noise_pct / 100.0)
    sigma = one * math.sqrt(2.0) if paired else one
    what = "x sqrt 2, two cells" if paired else "one measurement"
    return SinglePrior(sigma, FALLBACK_PRIOR_DF,
                       f"fallback constant run_noise_pct={run_noise_pct:g}% ({what}), worth "
                       f"{FALLBACK_PRIOR_DF:g} df ({why})")


def single_prior(noise: Noise, name: str, run_noise_pct: float, *, two_cells: bool = False
                 ) -> SinglePrior:
    """One measurement's spread across repeats on one server, from the newest calibration run
    that has it, or the labelled fallback constant."""
    for run in noise.runs():
        c = run.checks.get(name)
        if c is not None and c.sigma_single is not None and c.single_df > 0:
            return SinglePrior(c.sigma_single, float(c.single_df),
                               f"calibration {run.provenance.date} ({noise.description})")
    why = "no calibration" if not noise.calibrations else "the calibration lacks this check"
    return fallback_prior(run_noise_pct, two_cells, why)


# ---------------------------------------------------------------- estimate from A/A rounds


def _paired_logs(check: str, pairs: Sequence[RoundPair]) -> np.ndarray:
    bad = [p.round + 1 for p in pairs
           if not (p.base > 0 and p.head > 0 and math.isfinite(p.base * p.head))]
    if bad:
        raise MeasurementError(
            f"calibration of {check}: round(s) {bad} have a figure that is not a positive number: "
            "the measurement is broken; nothing stored")
    return np.log(np.array([(p.base, p.head) for p in pairs], dtype=float))


def _side_ss(logs: np.ndarray) -> tuple[float, int]:
    """One build's log figures (blocks x rounds): sum of squares around each block's mean."""
    return float(((logs - logs.mean(axis=1, keepdims=True)) ** 2).sum()), \
        logs.shape[0] * (logs.shape[1] - 1)


def estimate_check(check: str, pairs: Sequence[RoundPair], rounds_per_block: int,
                   unit: str = "") -> CheckNoise:
    """One check's noise from its A/A (base, head) figures per round: round r belongs to
    block r // rounds_per_block, and only whole blocks count (a round missing on either side
    takes its block out, never shifts later rounds into another server pair)."""
    kept = [p for block in whole_blocks(pairs, rounds_per_block) for p in block]
    blocks = len(kept) // rounds_per_block
    if blocks < 1 or blocks * rounds_per_block < 2:
        raise GateError(f"calibration of {check}: {len(pairs)} A/A round(s) make no whole "
                        f"block of {rounds_per_block} rounds with a spread; measure more rounds")
    logs = _paired_logs(check, kept)
    d = (logs[:, 1] - logs[:, 0]).reshape(blocks, rounds_per_block)
    means = d.mean(axis=1)
    within_df = blocks * (rounds_per_block - 1)
    within_ss = float(((d - means[:, None]) ** 2).sum())
    spread = max(float(d.std()), math.sqrt(within_ss / within_df) if within_df else 0.0)
    if not spread > 1e-9:  # rounding of equal ratios leaves ~1e-17, not a spread
        raise MeasurementError(
            f"calibration of {check}: the paired ratio is identical in every round (spread 0): "
            "the figures do not vary as measurements do; nothing stored")
    single = math.sqrt((float(logs[:, 0].var(ddof=1)) + float(logs[:, 1].var(ddof=1))) / 2.0)
    side_ss, side_df = 0.0, 0
    for column in (0, 1):  # both sides are the same build: their spreads pool
        ss, df = _side_ss(logs[:, column].reshape(blocks, rounds_per_block))
        side_ss, side_df = side_ss + ss, side_df + df
    return CheckNoise(
        unit=unit, block_means=[float(m) for m in means],
        within_sd=math.sqrt(within_ss / within_df) if within_df and within_ss > 0 else None,
        within_df=within_df if within_ss > 0 else 0,
        side_within_sd=math.sqrt(side_ss / side_df) if side_df and side_ss > 0 else None,
        side_within_df=side_df if side_ss > 0 else 0,
        sigma_single=single if single > 0 else None, single_df=len(logs) - 1 if single > 0 else 0)


def estimate_side(check: str, figures: Mapping[int, float], rounds_per_block: int,
                  unit: str = "") -> CheckNoise | None:
    """One build's own spreads from its figures by round (the base side of an A/B whose base
    is a trusted build): round to round on one server, and across rounds; no paired block
    means (the other side ran other code). None: no whole block with a spread."""
    pairs = [RoundPair(r, v, v) for r, v in figures.items()]
    kept = [p for block in whole_blocks(pairs, rounds_per_block) for p in block]
    blocks = len(kept) // rounds_per_block
    if blocks < 1 or rounds_per_block < 2:
        return None
    logs = _paired_logs(check, kept)[:, 0]
    ss, df = _side_ss(logs.reshape(blocks, rounds_per_block))
    if not ss > 0:
        return None
    single = float(logs.var(ddof=1)) if logs.size > 1 else 0.0
    return CheckNoise(unit=unit, side_within_sd=math.sqrt(ss / df), side_within_df=df,
                      sigma_single=math.sqrt(single) if single > 0 else None,
                      single_df=logs.size - 1 if single > 0 else 0)


def estimate_run(pairs_by_check: Mapping[str, Sequence[RoundPair]],
                 design: CalibrationDesign, provenance: NoiseProvenance,
                 cost: CalibrationCost | None = None,
                 units: Mapping[str, str] | None = None) -> CalibrationRun:
    """A calibration run from A/A data: per check, the (base, head) figures of each round. Any
    check without a whole block, with a non-positive figure or no spread is an error naming it."""
    if not pairs_by_check:
        raise GateError("calibration produced no paired figures: nothing to store")
    units = units or {}
    checks = {name: estimate_check(name, pairs, design.rounds_per_block, units.get(name, ""))
              for name, pairs in pairs_by_check.items()}
    return CalibrationRun(provenance=provenance, design=design, cost=cost, checks=checks)


def offset_warnings(run: CalibrationRun, alpha: float = 0.01) -> list[str]:
    """Checks whose block means sit further from 0 than their spread explains (t test at
    alpha/K): the server started as 'head' is systematically faster, a bias no pairing or
    restart cancels."""
    out = []
    each = alpha / max(len(run.checks), 1)
    for name, c in run.checks.items():
        m = np.asarray(c.block_means)
        if m.size < 2 or not m.std(ddof=1) > 0:
            continue
        t = abs(m.mean()) / (m.std(ddof=1) / math.sqrt(m.size))
        if 2 * special.stdtr(m.size - 1, -t) < each:
            out.append(
                f"{name}: the two sides differ by {math.expm1(m.mean()):+.1%} on average over "
                f"{m.size} A/A server pairs: a systematic difference between the sides, not "
                "noise; find its cause before trusting A/B verdicts on this check")
    return out


def make_provenance(runner: str = "", command: str = "", note: str = "") -> NoiseProvenance:
    return NoiseProvenance(date=today(), gate_version=__version__, runner=runner, command=command,
                           note=note)


# ---------------------------------------------------------------- files


def upgrade_v1(data: dict[str, Any], where: str) -> dict[str, Any]:
    """A schema v1 file (one spread per check, from the rounds of one server pair) as v2: one
    block, no between-server spread, its runner key widened to any CPUs and quota."""
    v1 = validate(_V1, data, f"noise calibration {where} (schema v1)")
    hw = v1.hardware_key
    key = f"{hw}; *" if hw.lower().startswith("cpu:") else f"gpu: {hw}*"
    history = [HistoryRun(plan_hash=h.plan_hash, run=_v1_run(h.provenance, h.checks))
               for h in v1.history]
    return NoiseCalibration(plan=v1.plan, plan_hash=v1.plan_hash, runner_key=key,
                            runs=[_v1_run(v1.provenance, v1.checks)],
                            history=history).model_dump(mode="json")


def _v1_run(provenance: NoiseProvenance, v1_checks: dict[str, _V1Check]) -> CalibrationRun:
    checks = {name: CheckNoise(
        unit=c.unit, block_means=[c.aa_mean if c.aa_mean is not None else 0.0],
        within_sd=c.sigma, within_df=c.pairs - 1, sigma_single=c.sigma_single,
        single_df=c.pairs - 1 if c.sigma_single else 0) for name, c in v1_checks.items()}
    note = (provenance.note + "; " if provenance.note else "") + \
        "read from schema v1: one server pair, no between-server spread"
    rounds = max(c.pairs for c in v1_checks.values())
    return CalibrationRun(provenance=provenance.model_copy(update={"note": note}),
                          design=CalibrationDesign(servers="persistent", rounds_per_block=rounds),
                          checks=checks)


class _V1Check(StrictModel):
    sigma: float = Field(gt=0)
    pairs: int = Field(ge=2)
    unit: str = ""
    aa_mean: float | None = None
    sigma_single: float | None = Field(None, gt=0)


class _V1History(StrictModel):
    provenance: NoiseProvenance
    plan_hash: str
    checks: dict[str, _V1Check] = Field(min_length=1)


class _V1(StrictModel):
    schema_version: Literal[1]
    plan: str
    plan_hash: str
    hardware_key: str
    provenance: NoiseProvenance
    checks: dict[str, _V1Check] = Field(min_length=1)
    history: list[_V1History] = Field(default_factory=list)


def load_calibration(path: str | Path) -> NoiseCalibration:
    path = Path(path)
    data = load_yaml_mapping(path, "noise calibration")
    version = data.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise GateError(
            f"noise calibration {path} has schema v{version}; this gate reads "
            f"v{', v'.join(str(v) for v in READABLE_VERSIONS)}: calibrate again (gate calibrate)")
    if version == 1:
        data = upgrade_v1(data, str(path))
    return validate(NoiseCalibration, data, f"noise calibration {path}")


def load_all_calibrations(directory: str | Path) -> list[tuple[Path, NoiseCalibration]]:
    return [(p, load_calibration(p)) for p in record_files(directory)]


def calibration_mismatches(stored: CalibrationKey, want: CalibrationKey) -> list[str]:
    """Every way `stored` does not describe the run `want`; empty when it applies."""
    out = []
    if stored.plan != want.plan:
        out.append(f"plan: calibration {stored.plan!r}, run {want.plan!r}")
    if not fnmatch.fnmatchcase(want.runner_key.lower(), stored.runner_key.lower()):
        out.append(f"runner: calibration {stored.runner_key!r}, run {want.runner_key!r}")
    if stored.plan_hash != want.plan_hash:
        out.append(f"plan_hash: calibration {stored.plan_hash}, run {want.plan_hash} (the plan's "
                   "measurement changed since calibration: run gate calibrate again)")
    return out


@dataclass(frozen=True)
class CalibrationLookup:
    """The calibrations that apply, with their files, and for every other file why not."""

    matches: list[tuple[Path, NoiseCalibration]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.matches:
            return "calibration " + ", ".join(str(p) for p, _ in self.matches)
        if not self.rejected:
            return "no calibration found"
        return "no calibration matched: " + "; ".join(self.rejected)

    def noise(self) -> Noise:
        return Noise(tuple(c for _, c in self.matches), self.describe())


def find_calibrations(directories: Sequence[str | Path], want: CalibrationKey
                      ) -> CalibrationLookup:
    """Every calibration in `directories` for `want` (they pool). A broken file is a
    GateError, never skipped."""
    matches, rejected = [], []
    for directory in dict.fromkeys(Path(d) for d in directories):
        for path, cal in load_all_calibrations(directory):
            why = calibration_mismatches(cal.identity, want)
            if why:
                rejected.append(f"{path}: {', '.join(why)}")
            else:
                matches.append((path, cal))
    return CalibrationLookup(matches, rejected)


def cache_noise_dir(cache_dir: Path) -> Path:
    """Where a runner keeps the calibrations it measured for itself (gate ab --calibrate)."""
    return Path(cache_dir) / "noise"


def noise_dirs(given: Sequence[Path] | None, cache_dir: Path | None) -> list[Path]:
    """The folders calibrations are read from: the given ones (default ./baselines/noise),
    then the cache folder's, where a persistent runner's own calibrations are (None: not
    read, as in the shipped GPU workflows: GATE_CACHE_CALIBRATIONS=false)."""
    cache = [] if cache_dir is None else [cache_noise_dir(cache_dir)]
    return [*(given or [DEFAULT_NOISE_DIR]), *cache]


def noise_for(directories: Sequence[str | Path], plan: str, plan_hash: str, fp: Fingerprint
              ) -> Noise:
    """The calibrations in `directories` for this plan and runner, or why there are none."""
    if not directories:
        return Noise(description="no calibration folder given")
    key = CalibrationKey(plan=plan, plan_hash=plan_hash, runner_key=runner_key(fp))
    return find_calibrations(directories, key).noise()


def calibration_filename(identity: CalibrationKey) -> str:
    return f"{slug(identity.plan)}--{slug(identity.runner_key)}.yaml"


def _same_key_file(directory: Path, key: CalibrationKey) -> Path | None:
    for path, cal in load_all_calibrations(directory):
        if cal.plan == key.plan and cal.runner_key == key.runner_key:
            return path
    return None


def store_run(directory: str | Path, key: CalibrationKey, run: CalibrationRun) -> Path:
    """Add `run` to the file of `key` in `directory` (the file with that exact plan and runner
    key, else a new {plan}--{runner}.yaml): newest first, runs of another plan hash moved to
    history. An existing file that does not load is an error and is left as it is; so is
    anything that fails before the final rename."""
    directory = Path(directory)
    path = _same_key_file(directory, key) if directory.is_dir() else None
    path = path or directory / calibration_filename(key)
    runs, history = [run], []
    if path.exists():
        old = load_calibration(path)  # a broken stored file stops here, untouched
        if old.plan_hash == key.plan_hash:
            runs += old.runs
            history = old.history
        else:
            history = [HistoryRun(plan_hash=old.plan_hash, run=r) for r in old.runs] + old.history
    runs = newest_first(runs)  # by date, so the cut below drops the oldest
    new = NoiseCalibration(**key.model_dump(), runs=runs[:MAX_RUNS], history=history[:MAX_HISTORY])
    return write_record(path, new)
