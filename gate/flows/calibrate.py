"""`gate calibrate`: measure this runner's noise and store it as a noise profile.

It runs A/A rounds exactly as `gate ab` runs A/B rounds (same servers, same cell order, same
pairing), with the same build on both sides and no early stop, then takes per check the
spread of the paired log ratio d = log(head / base) across rounds (gate.judge.noise). `gate ab` and
`gate compare` use that spread as the prior of their intervals on this hardware and plan.
"""

from __future__ import annotations

from pathlib import Path

from gate.core.errors import GateError
from gate.core.progress import Progress
from gate.flows import ab
from gate.judge.checks import per_repeat, ratio_slots, slots
from gate.judge.noise import (
    CalibrationKey,
    NoiseCalibration,
    estimate_calibration,
    make_provenance,
    offset_warnings,
    store_calibration,
)
from gate.judge.verdict import Outcome, Verdict
from gate.measure.results import Results
from gate.plan.spec import Plan
from gate.runner.fingerprint import Fingerprint

MIN_ROUNDS = 3


def aa_pairs(base: Results, head: Results, plan: Plan) -> tuple[dict, dict]:
    """Per check, the (base, head) figures of each round both sides measured, and the units.
    Every check the results can give is calibrated, judged by the plan's thresholds or not,
    so that switching one on later finds its spread."""
    found = slots(head) + ratio_slots(head, plan.thresholds)
    pairs, units = {}, {}
    for slot in found:
        b, h = per_repeat(base, slot), per_repeat(head, slot)
        common = sorted(set(b) & set(h))
        if common:
            pairs[slot.name] = [(b[r], h[r]) for r in common]
            units[slot.name] = slot.metric.unit
    return pairs, units


def runner_summary(fp: Fingerprint) -> str:
    quota = fp.cpu_quota.quota_cpus
    return (f"{fp.hardware_key}; {fp.host_cores} host cores, quota "
            f"{'none' if quota is None else f'{quota:g}'}, torch threads {fp.torch_threads}, "
            f"vllm {fp.vllm_version or '?'}")


def calibrate(plan: Plan, build: ab.Build, rounds: int, out: Path, noise_dir: Path,
              progress: Progress, cache_dir: Path, command: str = "") -> tuple[Path, NoiseCalibration]:
    """Run `rounds` A/A rounds of `build` against itself and store the noise profile. A run
    whose measurement broke stores nothing."""
    if rounds < MIN_ROUNDS:
        raise GateError(f"--rounds {rounds}: a noise profile needs at least {MIN_ROUNDS} rounds "
                        "(20 give the sequential A/B most of its decided passes)")
    fixed = plan.model_copy(update={"ab": plan.ab.model_copy(
        update={"min_rounds": rounds, "max_rounds": rounds, "budget_minutes": None})})
    base, head = (ab.Build(label, build.python, build.env) for label in ("base", "head"))
    result = ab.ab(fixed, base, head, out, _no_judgement, progress, cache_dir)
    broken = result.base.errors + result.head.errors + [
        f"{res.label} runner: {f.title}; fix: {f.fix}" for res in (result.base, result.head)
        if res.doctor for f in res.doctor.invalidating]
    if broken:
        raise GateError("calibration not stored: the measurement broke:\n  - "
                        + "\n  - ".join(broken[:8]), exit_code=4)
    pairs, units = aa_pairs(result.base, result.head, plan)
    fp = result.head.fingerprint
    identity = CalibrationKey(plan=plan.name, plan_hash=result.head.plan_hash,
                               hardware_key=fp.hardware_key)
    profile = estimate_calibration(pairs, identity, make_provenance(runner_summary(fp), command),
                               units)
    path = store_calibration(noise_dir, profile)
    for warning in offset_warnings(profile):
        progress(f"warning: {warning}")
    return path, profile


def _no_judgement(head: Results, base: Results | None) -> Verdict:
    """A/A rounds are not judged: every planned round is measured."""
    return Verdict(outcome=Outcome.INCONCLUSIVE, headline="calibrating: A/A rounds", mode="ab")
