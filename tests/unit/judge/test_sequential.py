"""gate/judge/sequential.py: small-sample intervals (coverage by simulation), alpha spending, the
decision rule, the sequential state, and the sequential A/B simulation's error rates."""

from __future__ import annotations

import importlib.util
import math
import sys

import numpy as np
import pytest
from support.paths import REPO_ROOT

from gate.judge import sequential as seq
from gate.judge.sequential import CheckSpec, Interval, LogSample, SequentialDesign
from gate.judge.verdict import Outcome

# ---------------------------------------------------------------- intervals


def _coverage(n: int, prior_df: int, trials: int, seed: int, confidence: float = 0.90) -> float:
    """Share of paired intervals that hold the true change; the prior sigma is itself an
    estimate from prior_df + 1 A/A rounds, as a noise profile is."""
    rng = np.random.default_rng(seed)
    sigma, mu = 0.08, math.log(1.07)
    hits = 0
    for _ in range(trials):
        prior = sigma * math.sqrt(rng.chisquare(prior_df) / prior_df) if prior_df else 0.0
        iv = seq.paired_interval(rng.normal(mu, sigma, n), prior, prior_df, confidence)
        hits += iv.lo_pct <= 7.0 <= iv.hi_pct
    return hits / trials


@pytest.mark.parametrize("n", [1, 2, 3])
def test_paired_interval_covers_at_its_level_with_a_profile(n):
    # 4000 trials: the standard error of a 90% coverage is 0.5 points
    assert 0.88 <= _coverage(n, prior_df=9, trials=4000, seed=n) <= 0.92


@pytest.mark.parametrize("n", [2, 3])
def test_paired_interval_covers_without_a_prior(n):
    assert 0.88 <= _coverage(n, prior_df=0, trials=4000, seed=10 + n) <= 0.92


def test_a_normal_quantile_would_undercover_at_small_df():
    """The same check fails for the z interval a bootstrap of a few values resembles: the test
    above can tell a valid small-n interval from an invalid one."""
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(4000):
        d = rng.normal(0.0, 0.08, 2)
        half = 1.645 * d.std(ddof=1) / math.sqrt(2)
        hits += abs(d.mean()) <= half
    assert hits / 4000 < 0.80


def test_one_round_without_a_prior_decides_nothing():
    iv = seq.paired_interval([0.5], prior_sigma=0.0, prior_df=0.0, confidence=0.95)
    assert iv.lo_pct == -100.0 and iv.hi_pct == math.inf
    assert seq.decide(iv, 10.0, seq.LOWER) == Outcome.INCONCLUSIVE
    assert seq.decide(iv, 10.0, seq.HIGHER) == Outcome.INCONCLUSIVE


def test_paired_interval_pools_prior_and_observed_spread():
    d = [0.10, 0.12, 0.08]
    mean, lo, hi = seq.paired_log_interval(d, prior_sigma=0.05, prior_df=9, confidence=0.95)
    s2 = (9 * 0.05**2 + 2 * np.var(d, ddof=1)) / 11
    half = seq.t_quantile(0.975, 11) * math.sqrt(s2 / 3)
    assert mean == pytest.approx(0.10)
    assert (lo, hi) == pytest.approx((0.10 - half, 0.10 + half))
    iv = seq.paired_interval(d, 0.05, 9, 0.95)
    assert iv.mean_pct == pytest.approx(math.expm1(0.10) * 100)


@pytest.mark.parametrize(("args", "match"), [
    (([], 0.05, 9, 0.95), "at least one"),
    (([0.1, math.nan], 0.05, 9, 0.95), "finite"),
    (([0.1], -0.05, 9, 0.95), "prior_sigma"),
    (([0.1], 0.05, -1, 0.95), "prior_df"),
    (([0.1], 0.05, 9, 1.5), "confidence"),
])
def test_paired_interval_refuses_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        seq.paired_interval(*args)


@pytest.mark.parametrize("n_head", [1, 2, 3])
def test_unpaired_interval_covers_at_small_n(n_head):
    rng = np.random.default_rng(20 + n_head)
    sigma, hits, trials = 0.10, 0, 4000
    for _ in range(trials):
        prior = sigma * math.sqrt(rng.chisquare(6) / 6)
        base = np.exp(rng.normal(math.log(100.0), sigma, 3))
        head = np.exp(rng.normal(math.log(90.0), sigma, n_head))
        iv = seq.unpaired_interval(seq.log_sample(head), seq.log_sample(base), prior, 6, 0.90)
        hits += iv.lo_pct <= -10.0 <= iv.hi_pct
    assert 0.88 <= hits / trials <= 0.92


def test_a_run_noisier_than_its_profile_is_noticed():
    rng = np.random.default_rng(8)
    assert not seq.spread_exceeds_prior(rng.normal(0, 0.05, 6), 0.05, 19)
    assert seq.spread_exceeds_prior(rng.normal(0, 0.20, 6), 0.05, 19)
    assert not seq.spread_exceeds_prior([0.3], 0.05, 19)  # one round shows no spread
    false_alarms = sum(seq.spread_exceeds_prior(rng.normal(0, 0.05, 4), 0.05 * math.sqrt(
        rng.chisquare(19) / 19), 19) for _ in range(2000))
    assert false_alarms / 2000 <= 0.02  # a 1% test


def test_log_sample_of_one_value_has_no_spread_and_refuses_zero():
    s = seq.log_sample([100.0])
    assert s == LogSample(math.log(100.0), None, 1)
    m = seq.log_sample_from_moments(233.0, 0.45, 1)
    assert m.sd is None and m.n == 1  # one measurement says nothing about spread
    assert seq.log_sample_from_moments(200.0, 20.0, 5).sd == pytest.approx(0.1)
    with pytest.raises(ValueError):
        seq.log_sample([0.0])


def test_unpaired_interval_at_one_repeat_each_needs_the_prior():
    head, base = seq.log_sample([90.0]), seq.log_sample([100.0])
    assert seq.unpaired_interval(head, base, 0.0, 0.0, 0.95).hi_pct == math.inf
    iv = seq.unpaired_interval(head, base, 0.05, 9, 0.95)
    assert iv.lo_pct < -10.0 < iv.hi_pct < 10.0


# ---------------------------------------------------------------- spending and decisions


@pytest.mark.parametrize("rho", [1.0, 2.0, 3.0])
def test_spending_adds_up_to_alpha(rho):
    parts = [seq.look_alpha(i, 6, 0.05, rho) for i in range(1, 7)]
    assert sum(parts) == pytest.approx(0.05)
    assert all(p > 0 for p in parts)
    if rho > 1:
        assert parts == sorted(parts)  # later looks get more


def test_one_look_is_the_fixed_bonferroni_level():
    assert seq.look_confidence(1, 1, 10, 0.95) == pytest.approx(1 - 0.05 / 10)
    assert seq.look_confidence(3, 6, 10, 0.95, rho=1.0) == pytest.approx(1 - 0.05 / 60)
    with pytest.raises(ValueError):
        seq.look_alpha(7, 6, 0.05)


@pytest.mark.parametrize(("interval", "direction", "outcome"), [
    (Interval(20, 15, 25), seq.LOWER, Outcome.FAIL),
    (Interval(5, -2, 9.9), seq.LOWER, Outcome.PASS),
    (Interval(5, -2, 12), seq.LOWER, Outcome.INCONCLUSIVE),
    (Interval(-20, -25, -15), seq.HIGHER, Outcome.FAIL),
    (Interval(-5, -9, 3), seq.HIGHER, Outcome.PASS),
    (Interval(-20, -25, -15), seq.LOWER, Outcome.PASS),  # faster latency is no regression
])
def test_an_interval_past_the_threshold_fails_inside_it_passes_across_it_is_inconclusive(interval, direction, outcome):
    assert seq.decide(interval, 10.0, direction) == outcome


# ---------------------------------------------------------------- the sequential state


def _specs(k: int = 4, sigma: float = 0.05, df: float = 9) -> list[CheckSpec]:
    return [CheckSpec(f"c{i}", 10.0, seq.LOWER, sigma, df) for i in range(k)]


def test_a_halved_drain_fails_in_the_first_round():
    # 10% noise per round, profile from 20 A/A rounds, 13 checks, 6 looks
    specs = [CheckSpec("drain.req_per_min", 10.0, seq.HIGHER, 0.10, 19)] + _specs(12, 0.10, 19)
    state = seq.start(SequentialDesign(6, len(specs)), specs)
    state = seq.observe(state, {"drain.req_per_min": [math.log(0.5)]} | {s.name: [0.0] for s in specs[1:]})
    action = seq.next_action(state)
    assert action.stop and action.outcome == Outcome.FAIL and "drain.req_per_min" in action.reason
    assert state.checks["drain.req_per_min"].decided_at == 1


def test_continue_until_decided_then_stop_with_pass():
    rng = np.random.default_rng(1)
    specs = _specs()
    state = seq.start(SequentialDesign(6, 4), specs)
    d = {s.name: list(rng.normal(0.0, 0.01, 6)) for s in specs}
    actions = []
    for look in range(1, 7):
        state = seq.observe(state, {k: v[:look] for k, v in d.items()})
        actions.append(seq.next_action(state))
        if actions[-1].stop:
            break
    assert not actions[0].stop and "undecided" in actions[0].reason
    assert actions[-1].stop and actions[-1].outcome == Outcome.PASS
    assert "every check decided" in actions[-1].reason


def test_max_rounds_and_budget_end_inconclusive():
    specs = _specs(1, sigma=0.3)
    state = seq.observe(seq.start(SequentialDesign(2, 1), specs), {"c0": [0.0]})
    assert not seq.next_action(state).stop
    over = seq.next_action(state, seconds_spent=500, budget_s=600, round_s=120)
    assert over.stop and over.outcome == Outcome.INCONCLUSIVE and "budget" in over.reason
    state = seq.observe(state, {"c0": [0.0, 0.01]})
    last = seq.next_action(state)
    assert last.stop and last.outcome == Outcome.INCONCLUSIVE and "max rounds (2)" in last.reason
    with pytest.raises(ValueError, match="past the design"):
        seq.observe(state, {"c0": [0.0, 0.01, 0.0]})


def test_decisions_stick_and_intervals_only_narrow():
    specs = _specs(2)
    state = seq.start(SequentialDesign(6, 2, stop_on_fail=False), specs)
    state = seq.observe(state, {"c0": [0.0], "c1": [math.log(2.0)]})
    assert state.checks["c1"].outcome == Outcome.FAIL
    assert not seq.next_action(state).stop  # stop_on_fail off: c0 is still undecided
    first = state.checks["c0"]
    state = seq.observe(state, {"c0": [0.0, 0.3], "c1": [math.log(2.0), 0.0]})
    assert state.checks["c1"].outcome == Outcome.FAIL and state.checks["c1"].decided_at == 1
    c0 = state.checks["c0"]
    assert first.lo_log <= c0.lo_log <= c0.hi_log <= first.hi_log


def test_disjoint_intervals_are_flagged():
    """A jump the profile's spread cannot explain: the intersection would be empty, so the
    latest interval is kept and the check says so."""
    at = math.log(1.1)
    specs = [CheckSpec("c0", 10.0, seq.LOWER, 0.001, 50)]
    state = seq.observe(seq.start(SequentialDesign(3, 1), specs), {"c0": [at]})
    assert state.checks["c0"].outcome == Outcome.INCONCLUSIVE and not state.checks["c0"].disjoint
    state = seq.observe(state, {"c0": [at, 0.6]})
    assert state.checks["c0"].disjoint and state.checks["c0"].interval.lo_pct > 10.0


def test_bad_designs_and_unknown_checks_are_refused():
    with pytest.raises(ValueError):
        SequentialDesign(0, 3)
    with pytest.raises(ValueError, match="family"):
        seq.start(SequentialDesign(3, 1), _specs(2))
    state = seq.start(SequentialDesign(3, 2), _specs(2))
    with pytest.raises(ValueError, match="no such check"):
        seq.observe(state, {"zz": [0.0]})


# ---------------------------------------------------------------- the simulation


@pytest.fixture(scope="module")
def sim():
    path = REPO_ROOT / "benchmarks" / "noise_simulation.py"
    spec = importlib.util.spec_from_file_location("noise_simulation", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def settings(sim):
    return sim.settings(sim.parse([]))


@pytest.mark.parametrize("name", ["cpu", "gpu"])
def test_sequential_aa_false_fails_stay_under_one_percent(sim, settings, name):
    model = sim.build_model(settings[name])
    design = sim.Design(6, 0.95, seq.DEFAULT_SPENDING_RHO, 20)
    tally = sim.run_trials(model, design, 0.0, 300, seed=41)
    assert tally.rate(Outcome.FAIL) <= 0.01, tally.outcomes


@pytest.mark.parametrize("name", ["cpu", "gpu"])
def test_a_2x_slowdown_fails_in_the_first_round(sim, settings, name):
    model = sim.build_model(settings[name])
    design = sim.Design(6, 0.95, seq.DEFAULT_SPENDING_RHO, 20)
    tally = sim.run_trials(model, design, 1.0, 100, seed=42)
    assert tally.rate(Outcome.FAIL) == 1.0
    assert tally.rounds == [1] * 100


def test_stopping_when_decided_keeps_the_false_fail_bound(sim):
    """One check whose true change is its threshold: the worst case. The spent design stays
    under alpha/2 like the fixed design; looking without spending does not."""
    rates = {}
    for kind in ("sequential", "fixed", "naive"):
        design = sim.Design(6, 0.95, seq.DEFAULT_SPENDING_RHO, 20, kind=kind)
        rates[kind] = sim.single_check_trials(design, 0.08, 10.0, 2000, seed=43).rate(Outcome.FAIL)
    # alpha/2 = 2.5%; 2000 trials give a standard error of 0.35 points
    assert rates["sequential"] <= 0.025 + 0.01 and rates["fixed"] <= 0.025 + 0.01
    assert rates["naive"] > 2 * rates["sequential"], rates
