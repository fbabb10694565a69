"""`gate calibrate`: measure this runner's noise and store it as a calibration run.

It measures A/A blocks exactly as `gate ab` measures A/B blocks (gate.flows.blocks: same
servers, a fresh pair per block, same cell order and pairing), with the same build on both
sides and no look between rounds, then
keeps per check the mean paired log ratio of every block and the spread of the rounds around
it (gate.judge.noise), with what a server pair and a round cost. `gate ab` sizes its
sequential test by it (gate.judge.ab_design); runs of one runner and plan pool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gate.core.errors import GateError
from gate.core.progress import Progress
from gate.flows.blocks import Costs, Pairing, measure_block
from gate.flows.sides import Build, make_side
from gate.judge.ab_design import ABDesign, NoDesign, calibrated_design, design_ab
from gate.judge.checks import per_repeat, ratio_slots, slots
from gate.judge.noise import (
    CalibrationCost,
    CalibrationDesign,
    CalibrationKey,
    CalibrationRun,
    CheckNoise,
    Noise,
    NoiseProvenance,
    estimate_run,
    estimate_side,
    make_provenance,
    noise_for,
    offset_warnings,
    runner_key,
    store_run,
)
from gate.judge.run_validity import integrity_errors
from gate.judge.sequential import RoundPair
from gate.measure.results import Results, load_results, save_results
from gate.plan.spec import Plan
from gate.runner.fingerprint import Fingerprint

MIN_BLOCKS = 2


def aa_pairs(base: Results, head: Results, *, plan: Plan
             ) -> tuple[dict[str, list[RoundPair]], dict[str, str]]:
    """Per check, the (base, head) figures of each round both sides measured (by round
    index), and the units. Every check the results can give is calibrated, judged by the
    plan's thresholds or not, so that switching one on later finds its spread."""
    found = slots(head) + ratio_slots(head, plan.thresholds)
    pairs, units = {}, {}
    for slot in found:
        b, h = per_repeat(base, slot), per_repeat(head, slot)
        common = sorted(set(b) & set(h))
        if common:
            pairs[slot.name] = [RoundPair(r, b[r], h[r]) for r in common]
            units[slot.name] = slot.metric.unit
    return pairs, units


def runner_summary(fp: Fingerprint) -> str:
    return (f"{runner_key(fp)}; {fp.host_cores} host cores, torch threads {fp.torch_threads}, "
            f"vllm {fp.vllm_version or '?'}")


@dataclass(kw_only=True)
class CalibrateOptions:
    plan: Plan
    build: Build
    blocks: int
    out: Path  # the A/A results
    store: Path  # the folder the calibration run is added to
    cache_dir: Path
    noise_dirs: list[Path] | None = None  # where the design is looked up afterwards
    progress: Progress = field(default_factory=lambda: Progress(quiet=True))
    command: str = ""


@dataclass(frozen=True, kw_only=True)
class Calibrated:
    path: Path
    run: CalibrationRun
    noise: Noise  # every calibration that now applies to this runner and plan
    design: ABDesign | NoDesign  # what gate ab will run, sized by them, or why none can


def calibrate(options: CalibrateOptions) -> Calibrated:
    """Measure `blocks` A/A blocks of the build against itself and add them to the stored
    calibration. A run whose measurement broke stores nothing (exit 4)."""
    plan = options.plan
    if options.blocks < MIN_BLOCKS:
        raise GateError(f"--blocks {options.blocks}: a calibration needs at least {MIN_BLOCKS} "
                        "blocks (the spread between server pairs)")
    base, head, cost = _measure(options)
    broken = base.errors + head.errors + [
        f"{res.label} runner: {f.title}; fix: {f.fix}" for res in (base, head)
        if res.doctor for f in res.doctor.invalidating]
    if broken:
        raise GateError("calibration not stored: the measurement broke:\n  - "
                        + "\n  - ".join(broken[:8]), exit_code=4)
    pairs, units = aa_pairs(base, head, plan=plan)
    fp = head.fingerprint
    run = estimate_run(pairs, calibrated_design(plan), make_provenance(
        runner_summary(fp), options.command), cost=cost, units=units)
    key = CalibrationKey(plan=plan.name, plan_hash=head.plan_hash, runner_key=runner_key(fp))
    path = store_run(options.store, key, run)
    for warning in offset_warnings(run):
        options.progress(f"warning: {warning}")
    noise = noise_for([*(options.noise_dirs or []), options.store], plan.name, head.plan_hash, fp)
    return Calibrated(path=path, run=run, noise=noise,
                      design=design_ab(plan, plan.thresholds, noise=noise))


def _measure(options: CalibrateOptions) -> tuple[Results, Results, CalibrationCost | None]:
    """The A/A results of both sides (written to options.out) and what a block cost."""
    plan = options.plan
    rounds = options.blocks * plan.ab.rounds_per_block
    fixed = plan.model_copy(update={"ab": plan.ab.model_copy(
        update={"min_rounds": rounds, "max_rounds": rounds, "budget_minutes": None})})
    sides = {label: make_side(fixed, Build(label=label, python=options.build.python,
                                           env=options.build.env),
                              out=options.out, cache_dir=options.cache_dir)
             for label in ("base", "head")}
    pairing = Pairing(plan=fixed, thresholds=plan.thresholds, sides=sides,
                      cache_dir=options.cache_dir, progress=options.progress)
    costs = Costs()
    measured = _aa_blocks(pairing, costs, rounds=rounds)
    out = pairing.results(rounds=measured, max_rounds=rounds)
    for label, res in out.items():
        save_results(res, options.out / label / "results.json")
    return out["base"], out["head"], costs.cost()


def _aa_blocks(pairing: Pairing, costs: Costs, *, rounds: int) -> int:
    """Blocks up to `rounds` rounds, no look between them; the rounds measured (fewer when a
    measurement broke: its side's error is recorded, and nothing will be stored)."""
    measured = 0
    while measured < rounds:
        end = measure_block(pairing, costs, rounds=measured, max_rounds=rounds)
        measured = end.rounds
        if end.error is not None:
            pairing.record(end.error)
            break
    return measured


# ---------------------------------------------------------------- trusted runs, added later


TRUSTED = ("both", "base")


@dataclass(frozen=True, kw_only=True)
class Added:
    key: CalibrationKey
    run: CalibrationRun
    rounds: int


def trusted_run(folder: Path, trusted: str, *, command: str = "") -> Added:
    """The calibration run a finished `gate ab` (or `gate calibrate`) folder gives, from code
    the caller vouches for: `both`, an A/A of one trusted build (a nightly run of the default
    branch: base and head the same vLLM and environment), whose paired rounds are A/A data
    like a calibration's; `base`, an A/B whose base is a trusted build, whose base side alone
    gives that build's own spreads (round to round on one server; never the paired figures,
    which carry the head's code). Refused, naming why: a broken measurement, or `both` for
    two different builds."""
    if trusted not in TRUSTED:
        raise GateError(f"--trusted {trusted}: one of {', '.join(TRUSTED)}")
    sides = {label: load_results(folder / label / "results.json") for label in ("base", "head")}
    for label, res in sides.items():
        if (broken := integrity_errors(res, label)):
            raise GateError(f"--add {folder}: its measurement broke ({broken[0]}): a broken run "
                            "is no calibration; nothing stored")
    base, head = sides["base"], sides["head"]
    if base.plan_hash != head.plan_hash:
        raise GateError(f"--add {folder}: base and head were measured with different plans")
    plan = head.plan
    design = calibrated_design(plan)
    provenance = make_provenance(runner_summary(base.fingerprint), command,
                                 f"added from {folder} (trusted: {trusted})")
    rounds = len({c.repeat for c in base.cells})
    if trusted == "both":
        if (why := _not_one_build(base, head)) is not None:
            raise GateError(f"--add {folder} --trusted both: {why}: an A/B of two builds is "
                            "not A/A data (its paired rounds carry the head's code); add its "
                            "base side alone with --trusted base")
        pairs, units = aa_pairs(base, head, plan=plan)
        run = estimate_run(pairs, design, provenance,
                           cost=_cost(base, head, rounds=rounds, plan=plan), units=units)
    else:
        run = _base_side(base, design=design, provenance=provenance)
    return Added(key=CalibrationKey(plan=plan.name, plan_hash=base.plan_hash,
                                    runner_key=runner_key(base.fingerprint)),
                 run=run, rounds=rounds)


def _not_one_build(base: Results, head: Results) -> str | None:
    b, h = base.fingerprint, head.fingerprint
    if (b.vllm_version, b.vllm_commit) != (h.vllm_version, h.vllm_commit):
        return (f"base is vLLM {b.vllm_version} ({b.vllm_commit}), head {h.vllm_version} "
                f"({h.vllm_commit})")
    if runner_key(b) != runner_key(h):
        return "base and head ran on different runners"
    return None


def _base_side(base: Results, *, design: CalibrationDesign,
               provenance: NoiseProvenance) -> CalibrationRun:
    checks: dict[str, CheckNoise] = {}
    for slot in slots(base) + ratio_slots(base, base.plan.thresholds):
        noise = estimate_side(slot.name, per_repeat(base, slot), design.rounds_per_block,
                              slot.metric.unit)
        if noise is not None:
            checks[slot.name] = noise
    if not checks:
        raise GateError("the base side has no whole block with a spread: nothing to store")
    return CalibrationRun(provenance=provenance, design=design, checks=checks)


def _cost(base: Results, head: Results, *, rounds: int, plan: Plan) -> CalibrationCost | None:
    """A server pair's and a round's runner seconds, both builds together, from the runs'
    timings (what `gate calibrate` measures on the clock)."""
    blocks = rounds // plan.ab.rounds_per_block
    if not blocks or not rounds:
        return None
    t = {k: base.timings_s.get(k, 0.0) + head.timings_s.get(k, 0.0)
         for k in set(base.timings_s) | set(head.timings_s)}
    measured = t.get("drain_s", 0.0) + t.get("sweep_s", 0.0)
    # Summed over both builds, not halved: a block's two servers start side by side, but each
    # build's startup_s is its own wait for health, and the second build's wait begins when
    # the first's (and its warm-up) ends, so the two waits add up to the pair's start on the
    # clock (halving them priced a block on a 2-core runner at 191 s against 221 s measured).
    pair = sum(t.get(k, 0.0) for k in ("startup_s", "model_s", "warmup_s", "doctor_s",
                                        "shutdown_s"))
    if not (measured > 0 and pair > 0):
        return None
    return CalibrationCost(pair_s=pair / blocks, round_s=measured / rounds)
