"""What would meet the goals on a runner too noisy for a plan's thresholds within its limits
(gate.judge.reach): the advice in `gate ab`'s notes must be one that, taken, meets them."""

from __future__ import annotations

import re

import pytest
from support.calibrations import (
    CPU_SMOKE,
    CPU_SMOKE_CHECKS,
    calibration_for,
    calibration_run,
    cpu_smoke_results,
    specs_and_spreads,
)

from gate.judge.ab_design import design_ab
from gate.judge.noise import Noise
from gate.judge.reach import MAX_FACTOR, SizedCheck, longer_design, looser_thresholds
from gate.judge.sizing import RunnerCost, size
from gate.plan.spec import apply_overrides


def loud_tpot_noise(between: float = 0.025, within: float = 0.025) -> Noise:
    """Every check calm but those of TPOT p50 (and its guided/free ratio), whose spread
    between server pairs is loud."""
    calm = calibration_run(names=CPU_SMOKE_CHECKS, between=0.01, within=0.03)
    loud = calibration_run(names=CPU_SMOKE_CHECKS, between=between, within=within)
    checks = {n: (loud if "tpot_p50" in n else calm).checks[n] for n in CPU_SMOKE_CHECKS}
    run = calm.model_copy(update={"checks": checks})
    return Noise((calibration_for(cpu_smoke_results(), run),), "loud TPOT")


@pytest.fixture(scope="module")
def advice() -> str:
    design = design_ab(CPU_SMOKE, CPU_SMOKE.thresholds, noise=loud_tpot_noise())
    assert not design.sizing.reachable and "What would meet them here" in design.note
    return design.note


def test_the_longer_design_it_names_is_taken_as_named(advice):
    rounds, minutes = map(int, re.search(r"`--max-rounds (\d+) --budget-minutes (\d+)`",
                                         advice).groups())
    assert rounds > CPU_SMOKE.ab.max_rounds
    longer = apply_overrides(CPU_SMOKE, ab={"max_rounds": rounds, "budget_minutes": minutes})
    design = design_ab(longer, longer.thresholds, noise=loud_tpot_noise())
    # the advice holds the design (the design at most that long, sized afresh: a longer cap
    # spends the error rates over more looks, so the same noise may need a block less)
    assert design.sizing.reachable
    assert CPU_SMOKE.ab.max_rounds < design.design.max_rounds <= rounds


def test_the_looser_thresholds_it_names_decide_within_the_plans_blocks(advice):
    flags = dict(re.findall(r"--threshold (\w+)=([\d.]+)", advice))
    # only the loud checks' thresholds move (TPOT p50, and the overhead: a ratio of TPOT p50s)
    assert "tpot_p50_pct" in flags and set(flags) <= {"tpot_p50_pct", "overhead_pct"}
    value = float(flags["tpot_p50_pct"])
    assert CPU_SMOKE.thresholds.tpot_p50_pct < value <= MAX_FACTOR * CPU_SMOKE.thresholds.tpot_p50_pct
    looser = CPU_SMOKE.thresholds.model_copy(update={k: float(v) for k, v in flags.items()})
    design = design_ab(CPU_SMOKE, looser, noise=loud_tpot_noise())
    # ... and within the plan's budget: the advice names --budget-minutes when it would not be
    assert "--budget-minutes" not in advice.split("looser thresholds")[1]
    tight = apply_overrides(CPU_SMOKE, ab={"budget_minutes": 5})
    note = design_ab(tight, tight.thresholds, noise=loud_tpot_noise()).note
    budget = re.search(r"--threshold tpot_p50_pct=[\d.]+ --budget-minutes (\d+)`", note)
    assert budget is not None
    taken = apply_overrides(tight, ab={"budget_minutes": int(budget.group(1))})
    assert design_ab(taken, looser, noise=loud_tpot_noise()).sizing.reachable
    assert design.sizing.reachable
    assert design.design.max_rounds <= CPU_SMOKE.ab.max_rounds


def test_the_search_raises_the_loudest_check_by_whole_steps_only_as_far_as_needed():
    specs, spreads = specs_and_spreads(0.04, 0.04, k=2)
    checks = [SizedCheck(specs[0], spreads[0], "loud_pct"),
              SizedCheck(specs[1], spreads[1], "other_pct")]
    quiet_specs, quiet_spreads = specs_and_spreads(0.005, 0.01, k=1)
    checks[1] = SizedCheck(quiet_specs[0], quiet_spreads[0], "other_pct")
    cost = RunnerCost(70.0, 65.0)
    looser = looser_thresholds(checks, 2, cost, max_blocks=8)
    assert looser is not None and set(looser.thresholds) == {"loud_pct"}
    assert looser.thresholds["loud_pct"] % 5 == 0 and looser.sizing.reachable
    one_step_less = looser.thresholds["loud_pct"] - 5
    tighter = [SizedCheck(specs[0].__class__(**{**specs[0].__dict__, "threshold_pct": one_step_less}),
                     spreads[0], "loud_pct"), checks[1]]
    assert not size([c.spec for c in tighter], [c.spread for c in tighter], 2, cost,
                    max_blocks=8).reachable


def test_noise_past_every_remedy_says_so_and_names_the_cells():
    specs, spreads = specs_and_spreads(0.3, 0.3, k=1)
    checks = [SizedCheck(specs[0], spreads[0], "tpot_p50_pct")]
    assert longer_design(checks, 2, RunnerCost(70.0, 65.0)) is None
    assert looser_thresholds(checks, 2, RunnerCost(70.0, 65.0), max_blocks=20) is None
