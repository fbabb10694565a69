"""gate/judge/sizing.py and ab_design.py: what a runner needs to decide a plan (blocks, minutes,
error rates at no change, at the thresholds and at 1.5x them), the design from nothing, and
what a calibration's notes say when the plan's limits hold less than the goals need."""

from __future__ import annotations

import math
import re
import shlex

import numpy as np
import pytest
import yaml
from support.calibrations import (
    CPU_SMOKE,
    CPU_SMOKE_CHECKS,
    calibration_run,
    cpu_smoke_results,
    noise_for_results,
    specs_and_spreads,
)

from gate.cli.ab import ab_plan
from gate.cli.calibrate import calibrated_plan
from gate.cli.main import build_parser
from gate.core.errors import EXIT_UNDECIDED
from gate.judge.ab_design import NoDesign, calibrated_design, calibration_command, design_ab
from gate.judge.checks import judged, planned_slots, ratio_slots, slots
from gate.judge.noise import Noise
from gate.judge.sizing import FALSE_FAIL_GOAL, MISS_GOAL, Layout, RunnerCost, Spread, draw, size
from gate.plan.spec import apply_overrides, load_plan, pin_runner


def test_a_block_costs_a_pair_of_server_starts_and_its_rounds():
    assert RunnerCost(70.0, 65.0).block_s(2) == 200.0
    assert RunnerCost(70.0, 65.0, per_round_servers=True).block_s(2) == 270.0


def test_persistent_blocks_share_an_offset_per_round_blocks_do_not():
    rng = np.random.default_rng(0)
    shared = draw(rng, Spread(0.1, 0.0), change=0.0, paths=2000, layout=Layout(3, 2)).badness
    assert np.allclose(shared[:, 0], shared[:, 1])
    own = draw(rng, Spread(0.1, 0.0), change=0.0, paths=2000,
               layout=Layout(3, 2, pairs_per_block=2)).badness
    assert not np.allclose(own[:, 0], own[:, 1])
    assert np.std(own.mean(axis=1)) == pytest.approx(0.1 / math.sqrt(6), rel=0.1)


def test_each_builds_rounds_make_the_paired_spread():
    """Each build's own rounds vary by within / sqrt 2, so the paired ratio's rounds vary by
    `within` around their block's offset, and the head's figure is the base's plus it."""
    drawn = draw(np.random.default_rng(1), Spread(0.0, 0.1), change=0.05, paths=20000,
                 layout=Layout(1, 2))
    assert np.std(drawn.base) == pytest.approx(0.1 / math.sqrt(2), rel=0.05)
    assert np.std(drawn.badness) == pytest.approx(0.1, rel=0.05)
    assert np.allclose(drawn.head - drawn.base, drawn.badness)


def test_a_sized_design_meets_the_goals_and_more_noise_needs_more_blocks():
    cost = RunnerCost(70.0, 65.0)
    calm = size(*specs_and_spreads(0.01, 0.02), 2, cost, paths=1500)
    noisy = size(*specs_and_spreads(0.02, 0.03), 2, cost, paths=1500)
    for s in (calm, noisy):
        assert s.reachable and s.miss <= MISS_GOAL
        assert s.false_fail <= s.false_fail_at_threshold <= FALSE_FAIL_GOAL
    assert noisy.design.max_blocks > calm.design.max_blocks
    assert noisy.minutes_max == pytest.approx(noisy.design.max_blocks * 200.0 / 60)
    assert calm.aa_rounds_median <= calm.design.max_rounds
    assert size(*specs_and_spreads(0.01, 0.02), 2, cost, paths=1500) == calm  # seeded
    assert "false fail at most 1% by construction" in calm.describe()


def test_noise_far_beyond_the_thresholds_is_unreachable():
    s = size(*specs_and_spreads(0.25, 0.3), 2, RunnerCost(70.0, 65.0), paths=500, max_blocks=6)
    assert not s.reachable and s.design.max_blocks == 6


# ---------------------------------------------------------------- gate ab's design


def test_the_planned_checks_are_the_ones_the_results_will_give():
    res = cpu_smoke_results()
    found = judged(slots(res), CPU_SMOKE.thresholds) + \
        judged(ratio_slots(res, CPU_SMOKE.thresholds), CPU_SMOKE.thresholds)
    planned = planned_slots(CPU_SMOKE, CPU_SMOKE.thresholds)
    assert [s.name for s in planned] == [s.name for s in found]
    assert "drain.output_tok_s" not in [s.name for s in planned]  # one check per measurement


def test_the_calibration_command_measures_what_the_ab_would(tmp_path):
    """The advice must calibrate the plan as this A/B measures it: a file by its path (the
    built-in plan of the same name has other cells), a backend of a backends plan, the pinned
    model runner and the cell overrides gate calibrate takes."""
    assert calibration_command(CPU_SMOKE) == "gate calibrate --plan cpu-smoke --blocks 10"
    file = tmp_path / "my plan.yaml"
    file.write_text(yaml.safe_dump(CPU_SMOKE.model_dump(mode="json")))
    assert load_plan(file) == CPU_SMOKE  # how a plan was named is not part of it
    plan = pin_runner(apply_overrides(load_plan(file), levels=[4], window_s=3.0), "v1")
    assert calibration_command(plan.for_backend("guidance"), 3) == (
        f"gate calibrate --plan '{file}' --model-runner v1 --levels 4 --window 3 "
        "--backend guidance --blocks 3")
    # a plan whose own name holds a `+` is not taken for a backend plan
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({**CPU_SMOKE.model_dump(mode="json"), "name": "smoke+mine"}))
    assert calibration_command(load_plan(mine)) == shlex.join(
        ["gate", "calibrate", "--plan", str(mine), "--blocks", "10"])


@pytest.mark.parametrize("changes", [
    [],
    ["--drain-requests", "64", "--levels", "2,4", "--window", "3", "--model-runner", "v1"],
    ["--servers", "per_round", "--max-rounds", "8", "--threshold", "tpot_p50_pct=15"],
])
def test_the_calibration_gate_ab_advises_is_the_one_it_then_finds(changes):
    """Whatever plan changes `gate ab` is given, the `gate calibrate` it names, parsed as the
    user would run it, calibrates a plan of the same hash and server design: the calibration
    it stores is the one the same `gate ab` looks up next (not another plan's, asked for
    again)."""
    ab_args = build_parser(["ab"]).parse_args(["ab", "--out", "x", *changes])
    plan = ab_plan(ab_args)
    command = shlex.split(calibration_command(plan))
    assert command[:2] == ["gate", "calibrate"]
    calibrated = calibrated_plan(build_parser(["calibrate"]).parse_args(command[1:]))
    assert calibrated.measurement_hash() == plan.measurement_hash()
    assert calibrated_design(calibrated) == calibrated_design(plan)
    assert calibrated.name == plan.name


def test_no_calibration_runs_from_nothing_and_says_what_would_shorten_it():
    """A calibration is never a precondition: with none the A/B runs the plan's limits and
    learns the runner's noise; only --calibrate (require_calibration) stops before measuring."""
    nothing = Noise(description="no calibration found")
    design = design_ab(CPU_SMOKE, CPU_SMOKE.thresholds, noise=nothing)
    assert design.sizing is None and design.block_s is None
    assert design.design.max_blocks == CPU_SMOKE.ab.max_rounds // 2
    assert design.design.family_size == len(CPU_SMOKE_CHECKS)
    assert "learns this runner's noise from its own blocks" in design.describe()
    assert "gate calibrate --plan cpu-smoke --blocks 10" in design.note
    assert "no calibration found" in design.note and "gate calibrate --add" in design.note
    refused = design_ab(CPU_SMOKE, CPU_SMOKE.thresholds, noise=nothing, require_calibration=True)
    assert isinstance(refused, NoDesign) and refused.uncalibrated
    assert refused.verdict().exit_code == EXIT_UNDECIDED
    assert "gate calibrate --plan cpu-smoke --blocks 10" in refused.why


NAMES = CPU_SMOKE_CHECKS


def test_cpu_smoke_judges_one_check_per_signal():
    """The guided TTFT p50 follows TPOT p50 at its level and is not judged; the wait a schema
    adds is judged at c=8 only; drain output tok/s is drain req/min read per token."""
    assert NAMES == ("drain.req_per_min", "sweep.c4.tpot_p50_ms", "sweep.c8.tpot_p50_ms",
                     "ratio.c8.ttft_p50", "ratio.c8.tpot_p50")


def test_a_calibrated_runner_gets_a_design_within_the_plans_limits():
    noise = noise_for_results(cpu_smoke_results(), names=NAMES, between=0.01, within=0.02)
    design = design_ab(CPU_SMOKE, CPU_SMOKE.thresholds, noise=noise)
    assert design.checks == NAMES
    assert design.design.rounds_per_block == 2 and design.sizing.reachable
    assert design.design.max_rounds <= CPU_SMOKE.ab.max_rounds
    assert design.block_s == 60.0 + 2 * 90.0  # the calibration's measured cost
    assert "block(s) of 2 rounds" in design.describe()


def test_a_budget_too_small_is_said_and_the_ab_still_runs():
    noise = noise_for_results(cpu_smoke_results(), names=NAMES, between=0.01, within=0.02)
    design = design_ab(CPU_SMOKE, CPU_SMOKE.thresholds, noise=noise)
    blocks = design.sizing.blocks_to_decide()
    assert blocks is not None and blocks <= design.design.max_blocks
    decide_min = blocks * design.sizing.block_s / 60
    tight = CPU_SMOKE.model_copy(update={"ab": CPU_SMOKE.ab.model_copy(
        update={"budget_minutes": decide_min * 0.9})})
    taken = design_ab(tight, tight.thresholds, noise=noise)
    assert taken.design == design.design
    assert f"raise --budget-minutes to {math.ceil(decide_min)}" in taken.note
    assert "gate ab --resume" in taken.note


def test_a_runner_too_noisy_for_the_thresholds_is_told_what_helps():
    noise = noise_for_results(cpu_smoke_results(), names=NAMES, between=0.3, within=0.3)
    design = design_ab(CPU_SMOKE, CPU_SMOKE.thresholds, noise=noise)
    assert not design.sizing.reachable
    assert design.design.max_blocks == CPU_SMOKE.ab.max_rounds // 2  # the plan's, run anyway
    assert re.search(r"Neither 60 blocks nor thresholds up to 3x .* lower the runner's noise",
                     design.note)
    few = noise_for_results(cpu_smoke_results(), names=NAMES, between=0.04, within=0.05,
                            blocks=3)
    design = design_ab(CPU_SMOKE, CPU_SMOKE.thresholds, noise=few)
    assert re.search(r"rests on 3 server pairs .* calibrating 7 more blocks", design.note)


def test_a_calibration_of_another_block_size_does_not_count():
    run = calibration_run(names=NAMES, rounds_per_block=4)
    noise = noise_for_results(cpu_smoke_results(), names=NAMES)
    other = Noise((noise.calibrations[0].model_copy(update={"runs": [run]}),), "b4")
    assert design_ab(CPU_SMOKE, CPU_SMOKE.thresholds, noise=other).sizing is None
    refused = design_ab(CPU_SMOKE, CPU_SMOKE.thresholds, noise=other, require_calibration=True)
    assert isinstance(refused, NoDesign) and refused.uncalibrated
