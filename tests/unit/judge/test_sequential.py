"""gate/judge/sequential.py: the A/B's sequential t test on blocks of rounds (its error rates
by simulation with fixed seeds, at noises measured on the kept calibrations and far beyond,
from nothing and with a calibration), the first block's look for gross effects, the spread
check, whole blocks by round index; and the small-sample intervals of baseline mode and the
bound (coverage by simulation)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gate.judge import sequential as seq
from gate.judge.sequential import CheckSpec, Design, LogSample, Prior, RoundPair
from gate.judge.sizing import Layout, Spread, draw
from gate.judge.verdict import Outcome

T = 10.0  # threshold, %
# Measured on the kept 10-block calibration of a noisy 2-core AMD EPYC runner
# (benchmarks/calibrations/cpu-smoke--amd-epyc-2026-12-02.yaml), pooled as gate ab pools it:
# drain req/min between server pairs 6.6%, between rounds 10.7%; TPOT p50 at c=8 0% / 11.8%.
DRAIN = Spread(0.066, 0.107)
TPOT_C8 = Spread(0.0, 0.118)
DESIGN = Design(2, 20, family_size=5)


def prior(spread: Spread, df: int = 9, scale: float = 1.0) -> Prior:
    """A calibration's prior for this spread; `scale` < 1 understates it (an 'off' one)."""
    return Prior(block_sd=spread.block_sd(2) * scale, block_df=df,
                 within_sd=spread.within * scale, within_df=df, source="test")


def spec(p: Prior | None = None, threshold: float = T, direction=seq.LOWER) -> CheckSpec:
    return CheckSpec("sweep.c8.tpot_p50_ms", threshold, direction, p)


def simulate(change: float, spread: Spread, p: Prior | None, blocks: int = 20,
             paths: int = 4000, seed: int = 1, design: Design = DESIGN):
    rng = np.random.default_rng(seed)
    drawn = draw(rng, spread, change=change, paths=paths,
                 layout=Layout(blocks, design.rounds_per_block))
    return seq.run_paths(drawn.badness, spec(p), design=design, base=drawn.base)


def fail_rate(p) -> float:
    return float(np.mean(p.code == 1))


# ---------------------------------------------------------------- what a threshold means


def test_a_threshold_means_what_it_says():
    """A 10% throughput threshold is a 10% drop (head at 0.9x), not a 9.1% one; 1.5x it a 15%
    drop. A latency threshold is a rise."""
    drop = seq.zone_for(10.0, seq.HIGHER)
    assert drop.theta0 == pytest.approx(-math.log(0.90))
    assert drop.theta1 == pytest.approx(-math.log(0.85))
    rise = seq.zone_for(10.0, seq.LOWER)
    assert (rise.theta0, rise.theta1) == (pytest.approx(math.log(1.10)),
                                          pytest.approx(math.log(1.15)))
    assert seq.badness_of(10.0, seq.HIGHER) > seq.badness_of(10.0, seq.LOWER)
    with pytest.raises(ValueError):
        seq.zone_for(70.0, seq.HIGHER)  # 1.5x a 70% drop is no throughput at all


def test_a_drop_exactly_at_the_threshold_is_judged_as_the_threshold():
    """Half the rounds just past a 10% drop, half just short of it: a check that read the
    threshold as a 9.1% drop would fail a 9.5% drop; it must not."""
    p = prior(Spread(0.0, 0.002), df=40)
    rounds = [RoundPair(r, 100.0, 90.5) for r in range(8)]  # a 9.5% drop, tiny noise
    result = seq.replay(spec(p, direction=seq.HIGHER), rounds, Design(2, 20, 1))
    assert result.outcome != Outcome.FAIL


# ---------------------------------------------------------------- error rates by construction


@pytest.mark.parametrize("spread", [TPOT_C8, DRAIN, Spread(0.0, 0.01), Spread(0.2, 0.3)])
def test_false_fails_at_the_threshold_are_bounded_whatever_the_noise(spread):
    """From nothing (no calibration), at a change exactly at the threshold, the t test fails a
    check at most its share of the verdict's budget at every noise (the statistic is
    scale-free there). The first block's gross look is not part of that bound."""
    p = simulate(seq.zone_for(T).theta0, spread, None, paths=20000, seed=3)
    assert float(np.mean((p.code == 1) & ~p.gross)) <= 1.5 * DESIGN.mean_alpha


@pytest.mark.parametrize("spread", [TPOT_C8, DRAIN])
def test_the_gross_look_keeps_to_its_share_at_the_kept_noise(spread):
    """At the kept calibration's noise, the first block's gross look fails a change at the
    threshold no more than its share (GROSS_SHARE of the budget, per check)."""
    p = simulate(seq.zone_for(T).theta0, spread, None, blocks=1, paths=40000, seed=9)
    assert float(np.mean(p.gross)) <= seq.ALPHA * seq.GROSS_SHARE / DESIGN.family_size


@pytest.mark.parametrize("spread", [TPOT_C8, DRAIN])
def test_false_fails_with_an_exact_calibration_stay_in_budget(spread):
    p = simulate(seq.zone_for(T).theta0, spread, prior(spread), paths=20000, seed=4)
    assert fail_rate(p) <= 1.5 * (DESIGN.mean_alpha + seq.ALPHA * seq.GROSS_SHARE / 5)


@pytest.mark.parametrize("p", [None, prior(TPOT_C8)])
def test_a_change_of_one_and_a_half_thresholds_rarely_passes(p):
    """The pass end: at 1.5x the threshold a check passes at most BETA, from nothing or with
    a calibration (here the kept c=8 TPOT noise)."""
    result = simulate(seq.zone_for(T).theta1, TPOT_C8, p, paths=8000, seed=5)
    assert float(np.mean(result.code == -1)) <= 1.3 * seq.BETA


def test_a_calibration_makes_the_same_noise_decide_sooner():
    """From nothing the test learns the runner's noise from its blocks and passes a healthy
    A/B only from the second block; the kept calibration's prior makes it pass sooner."""
    alone = simulate(0.0, TPOT_C8, None, seed=6)
    helped = simulate(0.0, TPOT_C8, prior(TPOT_C8), seed=6)
    assert not np.any(alone.at[alone.code != 0] < 2 * seq.FIRST_LOOK)
    assert np.mean(alone.code == -1) >= 0.9 and np.mean(helped.code == -1) >= 0.95
    assert np.median(helped.at[helped.code == -1]) < np.median(alone.at[alone.code == -1])


def test_a_calibration_that_understates_this_runner_is_scaled_up():
    """A runner three times as noisy per round as its calibration (the shipped key matched such
    a VM), in all five checks of a verdict: the rounds of all of them scale the calibration
    (runner_gauge), so false fails at the threshold stay near the budget instead of following
    the understated prior."""
    rng = np.random.default_rng(7)
    off = prior(TPOT_C8, scale=1 / 3)
    drawn = [draw(rng, TPOT_C8, change=seq.zone_for(T).theta0, paths=20000, layout=Layout(20, 2))
             for _ in range(5)]
    runner = seq.runner_gauge([d.badness for d in drawn], [off] * 5, DESIGN)
    result = seq.run_paths(drawn[0].badness, spec(off), design=DESIGN, base=drawn[0].base,
                           runner=runner)
    assert np.median(result.scaled) > 4.0
    assert fail_rate(result) <= 3 * DESIGN.mean_alpha
    alone = seq.run_paths(drawn[0].badness, spec(off), design=DESIGN, base=drawn[0].base)
    assert fail_rate(alone) > fail_rate(result)  # one check's own rounds say it later


def test_a_calibration_that_matches_keeps_its_weight():
    """The same noise in run and calibration: the calibration is scaled only where the run's
    spread is past what one shared noise explains (10% of looks), so it shortens the test."""
    rng = np.random.default_rng(13)
    exact = prior(TPOT_C8)
    drawn = draw(rng, TPOT_C8, change=0.0, paths=4000, layout=Layout(20, 2))
    result = seq.run_paths(drawn.badness, spec(exact), design=DESIGN, base=drawn.base)
    assert np.mean(result.scaled[result.code == -1] == 1.0) > 0.6


def test_the_runner_gauge_pools_the_verdicts_checks():
    """A runner three times as noisy per round as its calibration in every check: five checks'
    rounds within two blocks say so far more surely than one check's."""
    rng = np.random.default_rng(12)
    p = prior(TPOT_C8)
    rounds = [rng.normal(0.0, 3 * TPOT_C8.within, (2000, 4)) for _ in range(5)]
    gauge = seq.runner_gauge(rounds, [p] * 5, DESIGN)
    assert gauge is not None and gauge.shape == (2000, 2)
    assert np.median(gauge[:, 1]) == pytest.approx(9.0, rel=0.15)
    one = seq.runner_gauge(rounds[:1], [p], DESIGN)
    assert np.mean(gauge[:, 1] < 4.0) < 0.1 < 0.3 < np.mean(one[:, 1] < 4.0)
    assert seq.runner_gauge(rounds, [None] * 5, DESIGN) is None
    assert seq.runner_gauge(rounds, [p] * 5, Design(2, 20, per_round_servers=True)) is None


# ---------------------------------------------------------------- looks


def test_the_first_block_fails_a_gross_effect_and_nothing_smaller():
    """From nothing, a doubled step fails when its first block ends; +30% waits for the t
    test's looks, which begin at the second block."""
    doubled = seq.replay(spec(), [RoundPair(r, 10.0, 20.0) for r in range(2)], DESIGN)
    assert doubled.outcome == Outcome.FAIL and doubled.gross and doubled.decided_at_round == 2
    assert doubled.block_range is not None and doubled.block_range.lo_pct == pytest.approx(100)
    smaller = seq.replay(spec(), [RoundPair(r, 10.0, 13.0) for r in range(2)], DESIGN)
    assert smaller.outcome == Outcome.INCONCLUSIVE and smaller.interval is None
    one_round = seq.replay(spec(), [RoundPair(0, 10.0, 20.0)], DESIGN)
    assert one_round.outcome == Outcome.INCONCLUSIVE and one_round.blocks == 0


def test_a_missing_round_takes_its_block_out_instead_of_shifting_the_rest():
    """Round 3 lacks a figure: blocks are rounds 0-1 and 4-5 (block 1 is incomplete), never
    rounds 2 and 4 in one block of two server pairs."""
    pairs = [RoundPair(r, 10.0, 10.0 * (1.5 if r // 2 == 1 else 1.0)) for r in (0, 1, 2, 4, 5)]
    blocks = seq.whole_blocks(pairs, 2)
    assert [[p.round for p in b] for b in blocks] == [[0, 1], [4, 5]]
    result = seq.replay(spec(prior(TPOT_C8)), pairs, DESIGN)
    assert result.blocks == 2 and result.interval is not None
    assert result.interval.mean_pct == pytest.approx(0.0, abs=1e-9)  # the 1.5x round is out


def test_a_decision_stays_decided_and_the_interval_is_on_the_d_scale():
    p = prior(Spread(0.01, 0.01))
    rounds = [RoundPair(r, 10.0, 10.0 * (1.3 if r < 4 else 1.0)) for r in range(8)]
    result = seq.replay(spec(p), rounds, DESIGN)
    assert result.outcome == Outcome.FAIL and result.decided_at_round == 4
    assert result.interval.mean_pct == pytest.approx(30.0)
    throughput = seq.replay(spec(p, direction=seq.HIGHER),
                            [RoundPair(r, 10.0, 7.0) for r in range(4)], DESIGN)
    assert throughput.outcome == Outcome.FAIL and throughput.interval.hi_pct < -10.0


# ---------------------------------------------------------------- the spread check


def test_a_jittery_head_fails_the_spread_check_and_an_equal_one_stays_in_budget():
    """A head whose rounds spread four times as much as its base's (its own stalls) is judged
    on that when the test stops; sides that spread exactly at the threshold's ratio fail at
    most the spread check's budget."""
    rng = np.random.default_rng(8)
    base = rng.normal(0.0, 0.03, (4000, 40))
    jittery = rng.normal(0.0, 0.12, (4000, 40))
    code, ratio = seq.spread_paths(jittery, base, 50.0, DESIGN)  # 20 blocks: 20 df each
    assert np.mean(code == 1) > 0.75 and np.median(np.sqrt(ratio)) == pytest.approx(4, rel=0.2)
    early, _ = seq.spread_paths(jittery, base, 50.0, DESIGN, stop_rounds=np.full(4000, 4))
    assert np.mean(early == 1) < np.mean(code == 1)  # judged at the stop, on its rounds
    bound = rng.normal(0.0, 0.045, (40000, 20))  # exactly 1.5x the base's sd: the threshold
    even = rng.normal(0.0, 0.03, (40000, 20))
    code, _ = seq.spread_paths(bound, even, 50.0, DESIGN)
    assert np.mean(code == 1) <= DESIGN.spread_alpha * 1.5
    result = seq.replay_spread("x", 50.0, [RoundPair(r, 10.0 * (1.01 if r % 2 else 0.99),
                                                     10.0 * (1.4 if r % 2 else 0.7))
                                           for r in range(12)], DESIGN)
    assert result.outcome == Outcome.FAIL and result.ratio > 10
    assert result.decided_at_round == 12 and result.interval[0] > 1.5


def test_the_budget_is_split_over_the_family():
    d = Design(2, 10, family_size=4)
    assert d.mean_alpha * 4 + d.spread_alpha * 4 == pytest.approx(
        seq.ALPHA * (1 - seq.GROSS_SHARE))
    with pytest.raises(ValueError):
        Design(2, seq.LOOK_HORIZON + 1)


# ---------------------------------------------------------------- intervals of the other modes


def _coverage(n: int, prior_df: int, trials: int, seed: int, confidence: float = 0.90) -> float:
    rng = np.random.default_rng(seed)
    sigma, mu = 0.08, math.log(1.07)
    hits = 0
    for _ in range(trials):
        prior_sd = sigma * math.sqrt(rng.chisquare(prior_df) / prior_df) if prior_df else 0.0
        iv = seq.paired_interval(rng.normal(mu, sigma, n), prior_sd, prior_df, confidence)
        hits += iv.lo_pct <= 7.0 <= iv.hi_pct
    return hits / trials


@pytest.mark.parametrize("n", [1, 2, 3])
def test_pooled_interval_covers_at_its_level_with_a_prior(n):
    # 4000 trials: the standard error of a 90% coverage is 0.5 points
    assert 0.88 <= _coverage(n, prior_df=9, trials=4000, seed=n) <= 0.92


def test_pooled_interval_covers_without_a_prior():
    assert 0.88 <= _coverage(3, prior_df=0, trials=4000, seed=13) <= 0.92


def test_one_value_without_a_prior_decides_nothing():
    iv = seq.paired_interval([0.5], prior_sigma=0.0, prior_df=0.0, confidence=0.95)
    assert iv.lo_pct == -100.0 and iv.hi_pct == math.inf
    assert seq.decide(iv, 10.0, seq.LOWER) == Outcome.INCONCLUSIVE


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
        prior_sd = sigma * math.sqrt(rng.chisquare(6) / 6)
        base = np.exp(rng.normal(math.log(100.0), sigma, 3))
        head = np.exp(rng.normal(math.log(90.0), sigma, n_head))
        iv = seq.unpaired_interval(seq.log_sample(head), seq.log_sample(base), prior_sigma=prior_sd,
                                   prior_df=6, confidence=0.90)
        hits += iv.lo_pct <= -10.0 <= iv.hi_pct
    assert 0.88 <= hits / trials <= 0.92


def test_log_samples():
    assert seq.log_sample([100.0]) == LogSample(math.log(100.0), None, 1)
    m = seq.log_sample_from_moments(233.0, 0.45, 1)
    assert m.sd is None and m.n == 1  # one measurement says nothing about spread
    assert seq.log_sample_from_moments(200.0, 20.0, 5).sd == pytest.approx(0.1)
    with pytest.raises(ValueError):
        seq.log_sample([0.0])


@pytest.mark.parametrize(("interval", "direction", "outcome"), [
    (seq.Interval(-50, -55, -45), seq.HIGHER, Outcome.FAIL),
    (seq.Interval(-3, -8, 2), seq.HIGHER, Outcome.PASS),
    (seq.Interval(-9, -14, -4), seq.HIGHER, Outcome.INCONCLUSIVE),
    (seq.Interval(25, 12, 38), seq.LOWER, Outcome.FAIL),
    (seq.Interval(5, 1, 9), seq.LOWER, Outcome.PASS),
])
def test_an_interval_past_the_threshold_fails_inside_it_passes_across_it_is_inconclusive(interval, direction, outcome):
    assert seq.decide(interval, 10.0, direction) == outcome


def test_bonferroni_confidence():
    assert seq.bonferroni_confidence(0.95, 5) == pytest.approx(0.99)
    with pytest.raises(ValueError):
        seq.bonferroni_confidence(0.95, 0)
