"""Noise profiles: the measured spread of the paired figures of `gate ab` on one runner class.

`gate calibrate` measures A/A rounds (the same build on both servers) and stores, per check,
the standard deviation across rounds of d = log(head / base) (natural log: 0.05 is about 5%)
and the number of pairs behind it. `gate compare`/`gate ab` take it as the prior spread of
their intervals (gate/judge/sequential.py), worth pairs - 1 degrees of freedom. One YAML file per
(plan, hardware key) in a folder beside the baselines (baselines/noise/ by default):

    schema_version: 1
    plan: cpu-smoke
    plan_hash: 3f2a...                    # Plan.measurement_hash(): cell sizes, levels, server
    hardware_key: 'cpu: AMD EPYC 7B13'    # Fingerprint.hardware_key, exact or an fnmatch pattern
    provenance: {date, gate_version, runner, command, note}
    checks:
      drain.req_per_min: {sigma: 0.031, pairs: 12, unit: req/min, aa_mean: 0.004, sigma_single: 0.05}
    history: [{provenance, plan_hash, checks}, ...]   # newest first, at most 20

Matching never guesses: a profile applies only when plan name, plan hash and hardware agree;
`find_calibration` names for every file in the folder what did not match, so the caller can say
why it fell back to the labelled constant.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import Field
from scipy import special

from gate import __version__
from gate.core.errors import GateError, MeasurementError
from gate.core.store import StrictModel, load_record, load_records, slug, today, write_record

NOISE_SCHEMA_VERSION = 1
MAX_HISTORY = 20
DEFAULT_NOISE_DIR = Path("baselines") / "noise"
# Degrees of freedom the labelled fallback constant is worth when no profile matches: enough
# to give a first round an interval, few enough that a run's own spread soon outweighs it.
FALLBACK_PRIOR_DF = 4.0


class CheckNoise(StrictModel):
    sigma: float = Field(gt=0, description="sd across rounds of d = log(head/base), natural log")
    pairs: int = Field(ge=2, description="A/A rounds (pairs) behind sigma; worth pairs - 1 df")
    unit: str = Field("", description="unit of the figure (req/min, ms, x)")
    aa_mean: float | None = Field(None, description="mean d over the A/A rounds (0 expected)")
    sigma_single: float | None = Field(
        None, gt=0, description="sd across rounds of log(figure) on one server: the prior of "
        "baseline mode, which is not paired in time"
    )

    @property
    def prior_df(self) -> float:
        return float(self.pairs - 1)


class NoiseProvenance(StrictModel):
    date: str = Field(description="ISO date of the calibration")
    gate_version: str = Field(description="gate version that measured it")
    runner: str = Field("", description="fingerprint summary: cores, quota, threads, versions")
    command: str = Field("", description="the command that measured it")
    note: str = ""


class CalibrationKey(StrictModel):
    plan: str = Field(description="plan name")
    plan_hash: str = Field(description="Plan.measurement_hash() of the calibrated plan")
    hardware_key: str = Field(description="Fingerprint.hardware_key, or an fnmatch pattern of it")


class NoiseHistoryEntry(StrictModel):
    provenance: NoiseProvenance
    plan_hash: str
    checks: dict[str, CheckNoise]


class NoiseCalibration(CalibrationKey):
    schema_version: int = NOISE_SCHEMA_VERSION
    provenance: NoiseProvenance
    checks: dict[str, CheckNoise] = Field(min_length=1)
    history: list[NoiseHistoryEntry] = Field(default_factory=list)

    @property
    def identity(self) -> CalibrationKey:
        return CalibrationKey(plan=self.plan, plan_hash=self.plan_hash, hardware_key=self.hardware_key)


# ---------------------------------------------------------------- priors for the intervals


@dataclass(frozen=True)
class Prior:
    """The prior spread of one check's paired log ratio, and where it came from (for people)."""

    sigma: float
    df: float
    source: str


def fallback_prior(run_noise_pct: float, paired: bool = True, why: str = "no noise profile") -> Prior:
    """The labelled constant (Thresholds.run_noise_pct: 1 sigma of ONE measurement, %). A
    pair's log ratio has two such measurements behind it: sqrt(2) times that."""
    one = math.log1p(run_noise_pct / 100.0)
    sigma = one * math.sqrt(2.0) if paired else one
    what = "per pair (x sqrt 2)" if paired else "per measurement"
    return Prior(sigma, FALLBACK_PRIOR_DF,
                 f"fallback constant run_noise_pct={run_noise_pct:g}% {what}, worth "
                 f"{FALLBACK_PRIOR_DF:g} df ({why})")


def prior_for(
    profile: NoiseCalibration | None, check: str, run_noise_pct: float, *, paired: bool = True,
    label: str = "",
) -> Prior:
    """The check's prior from `profile` (called `label` in the source), or the fallback
    constant when there is no profile, it lacks the check, or (unpaired) lacks sigma_single."""
    if profile is None:
        return fallback_prior(run_noise_pct, paired)
    entry = profile.checks.get(check)
    if entry is None:
        return fallback_prior(run_noise_pct, paired, f"noise profile {label} lacks this check")
    sigma = entry.sigma if paired else entry.sigma_single
    if sigma is None:
        return fallback_prior(run_noise_pct, paired, f"noise profile {label} has no unpaired spread")
    return Prior(sigma, entry.prior_df,
                 f"noise profile {label} ({entry.pairs} A/A pairs, {profile.provenance.date})")


# ---------------------------------------------------------------- estimate from A/A rounds


def _paired_logs(check: str, pairs: Sequence[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    if len(pairs) < 2:
        raise GateError(f"calibration of {check}: {len(pairs)} A/A pair(s); at least 2 rounds are needed")
    arr = np.asarray(pairs, dtype=float)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise GateError(f"calibration of {check}: expected (base, head) pairs")
    bad = [i + 1 for i, (b, h) in enumerate(arr) if not (b > 0 and h > 0 and math.isfinite(b * h))]
    if bad:
        raise MeasurementError(
            f"calibration of {check}: round(s) {bad} have a figure that is not a positive number: "
            "the measurement is broken; nothing stored"
        )
    logs = np.log(arr)
    return logs[:, 0], logs[:, 1]


def estimate_check(check: str, pairs: Sequence[tuple[float, float]], unit: str = "") -> CheckNoise:
    """One check's noise from its A/A (base, head) figures per round."""
    base, head = _paired_logs(check, pairs)
    d = head - base
    sigma = float(d.std(ddof=1))
    if not sigma > 1e-9:  # rounding of equal ratios leaves ~1e-17, not a spread
        raise MeasurementError(
            f"calibration of {check}: the paired ratio is identical in every round (spread 0): "
            "the figures do not vary as measurements do; nothing stored"
        )
    n = len(d)
    single = math.sqrt((float(base.var(ddof=1)) + float(head.var(ddof=1))) / 2.0)
    return CheckNoise(sigma=sigma, pairs=n, unit=unit, aa_mean=float(d.mean()),
                      sigma_single=single if single > 0 else None)


def estimate_calibration(
    pairs_by_check: Mapping[str, Sequence[tuple[float, float]]],
    identity: CalibrationKey,
    provenance: NoiseProvenance,
    units: Mapping[str, str] | None = None,
) -> NoiseCalibration:
    """A profile from A/A data: per check, the (base, head) figures of each round. Any check
    with fewer than 2 rounds, a non-positive figure or no spread is an error naming it."""
    if not pairs_by_check:
        raise GateError("calibration produced no paired figures: nothing to store")
    units = units or {}
    checks = {name: estimate_check(name, pairs, units.get(name, "")) for name, pairs in pairs_by_check.items()}
    return NoiseCalibration(**identity.model_dump(), provenance=provenance, checks=checks)


def offset_warnings(profile: NoiseCalibration, alpha: float = 0.01) -> list[str]:
    """Checks whose A/A mean is further from 0 than noise explains (t test at alpha/K): one
    server is systematically faster than the other, a bias pairing does not cancel."""
    out = []
    each = alpha / max(len(profile.checks), 1)
    for name, c in profile.checks.items():
        if c.aa_mean is None:
            continue
        t = abs(c.aa_mean) / (c.sigma / math.sqrt(c.pairs))
        if 2 * special.stdtr(c.pairs - 1, -t) < each:
            out.append(
                f"{name}: the two servers differ by {math.expm1(c.aa_mean):+.1%} on average over "
                f"{c.pairs} A/A rounds (spread {c.sigma:.1%} per round): a systematic server "
                "difference, not noise; find its cause before trusting A/B verdicts on this check"
            )
    return out


def make_provenance(runner: str = "", command: str = "", note: str = "") -> NoiseProvenance:
    return NoiseProvenance(date=today(), gate_version=__version__, runner=runner, command=command, note=note)


# ---------------------------------------------------------------- files


def load_calibration(path: str | Path) -> NoiseCalibration:
    return load_record(NoiseCalibration, path, "noise calibration", NOISE_SCHEMA_VERSION)


def load_all_calibrations(directory: str | Path) -> list[tuple[Path, NoiseCalibration]]:
    return load_records(NoiseCalibration, directory, "noise calibration", NOISE_SCHEMA_VERSION)


def calibration_mismatches(profile: CalibrationKey, want: CalibrationKey) -> list[str]:
    """Every way `profile` does not describe the run `want`; empty when it applies."""
    out = []
    if profile.plan != want.plan:
        out.append(f"plan: profile {profile.plan!r}, run {want.plan!r}")
    if not fnmatch.fnmatchcase(want.hardware_key.lower(), profile.hardware_key.lower()):
        out.append(f"hardware: profile {profile.hardware_key!r}, run {want.hardware_key!r}")
    if profile.plan_hash != want.plan_hash:
        out.append(
            f"plan_hash: profile {profile.plan_hash}, run {want.plan_hash} "
            "(the plan's measurement changed since calibration: run gate calibrate again)"
        )
    return out


@dataclass(frozen=True)
class CalibrationLookup:
    """The profile that applies (or None) and, for every other file, why it did not."""

    path: Path | None
    profile: NoiseCalibration | None
    rejected: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.profile is not None:
            return f"noise profile {self.path} ({self.profile.provenance.date})"
        if not self.rejected:
            return "no noise profile found"
        return "no noise profile matched: " + "; ".join(self.rejected)


def find_calibration(directory: str | Path, want: CalibrationKey) -> CalibrationLookup:
    """The one profile in `directory` for `want`. A broken file is a GateError (never skipped);
    several matches are a GateError naming them; none is a lookup with the reasons."""
    matches, rejected = [], []
    for path, profile in load_all_calibrations(directory):
        why = calibration_mismatches(profile.identity, want)
        if why:
            rejected.append(f"{path.name}: {', '.join(why)}")
        else:
            matches.append((path, profile))
    if len(matches) > 1:
        names = ", ".join(p.name for p, _ in matches)
        raise GateError(f"several noise profiles in {directory} match plan {want.plan!r} on "
                        f"{want.hardware_key!r}: {names}; keep one")
    if matches:
        return CalibrationLookup(matches[0][0], matches[0][1], rejected)
    return CalibrationLookup(None, None, rejected)


@dataclass(frozen=True)
class Noise:
    """The noise profile that applies to a run (None: the labelled fallback), and why."""

    profile: NoiseCalibration | None = None
    description: str = "no noise profile given"


def noise_for(directory: str | Path | None, plan: str, plan_hash: str, hardware_key: str) -> Noise:
    """The profile in `directory` for this plan and hardware, or the reason there is none."""
    if directory is None:
        return Noise(None, "no noise profile folder given")
    lookup = find_calibration(directory, CalibrationKey(plan=plan, plan_hash=plan_hash,
                                                     hardware_key=hardware_key))
    return Noise(lookup.profile, lookup.describe())


def calibration_filename(identity: CalibrationKey) -> str:
    return f"{slug(identity.plan)}--{slug(identity.hardware_key)}.yaml"


def store_calibration(directory: str | Path, profile: NoiseCalibration) -> Path:
    """Write `profile` atomically as {plan}--{hardware}.yaml in `directory`, moving the entry it
    replaces into its history. An existing file that does not load is an error and is left as
    it is; so is anything that fails before the final rename."""
    directory = Path(directory)
    path = directory / calibration_filename(profile.identity)
    new = profile.model_copy(deep=True)
    if path.exists():
        old = load_calibration(path)  # a broken stored profile stops here, untouched
        entry = NoiseHistoryEntry(provenance=old.provenance, plan_hash=old.plan_hash, checks=old.checks)
        new.history = [entry, *old.history][:MAX_HISTORY]
    return write_record(path, new)
