"""stats.py bootstrap pieces, and the noise simulation's false-fail and detection rates."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from gate import stats
from gate.stats import Estimate
from gate.verdict import Outcome


def test_rng_is_seeded_by_name():
    a = stats.bootstrap_mean([1.0, 2.0, 3.0], stats.rng_for("x"))
    b = stats.bootstrap_mean([1.0, 2.0, 3.0], stats.rng_for("x"))
    c = stats.bootstrap_mean([1.0, 2.0, 3.0], stats.rng_for("y"))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.min() >= 1.0 and a.max() <= 3.0


@pytest.mark.parametrize("q", [0.0, 0.1, 0.5, 0.9, 0.99, 1.0])
def test_weighted_quantile_matches_numpy(q):
    values = np.sort(np.random.default_rng(1).exponential(size=57))
    got = stats.weighted_quantile_sorted(values, np.ones(57, dtype=np.int64), q)
    assert got == pytest.approx(np.quantile(values, q))
    weights = np.random.default_rng(2).integers(0, 3, 57)
    expanded = np.repeat(values, weights)
    assert stats.weighted_quantile_sorted(values, weights, q) == pytest.approx(np.quantile(expanded, q))


def test_pooled_quantile_reference_and_spread():
    rng = np.random.default_rng(3)
    groups = [list(rng.normal(20, 2, 30)) for _ in range(40)]
    ref, reps = stats.bootstrap_pooled_quantile(groups, 0.99, stats.rng_for("itl"), 500)
    assert ref == pytest.approx(np.quantile(np.concatenate(groups), 0.99))
    assert reps.std() > 0 and abs(np.median(reps) / ref - 1) < 0.05


def test_little_factors():
    same = stats.little_factors([2.0] * 50, [100] * 50, stats.rng_for("d"), "request", 200)
    assert np.allclose(same, 1.0)
    rng = np.random.default_rng(4)
    f = stats.little_factors(rng.uniform(1, 3, 500), rng.integers(50, 150, 500), stats.rng_for("d"), "token")
    assert f.mean() == pytest.approx(1.0, abs=0.01) and 0 < f.std() < 0.05


def test_floor_widens_a_point_estimate():
    est = Estimate(100.0, stats.constant(100.0, 4000), 1, "point")
    logs = stats.with_floor(est, 10.0, stats.rng_for("f"))
    assert logs.std() == pytest.approx(0.10, rel=0.05)
    est4 = Estimate(100.0, stats.constant(100.0, 4000), 4, "point")
    assert stats.with_floor(est4, 10.0, stats.rng_for("f")).std() == pytest.approx(0.05, rel=0.05)
    wide = Estimate(100.0, 100.0 * np.exp(np.random.default_rng(5).normal(0, 0.3, 4000)), 1, "wide")
    assert stats.with_floor(wide, 10.0, stats.rng_for("f")).std() == pytest.approx(0.3, rel=0.05)


def test_relative_interval_covers_the_change():
    rng = stats.rng_for("r")
    head = Estimate(121.0, stats.constant(121.0), 1, "")
    base = Estimate(233.0, stats.lognormal_draws(233.0, 0.45, 1, rng), 1, "")
    delta, lo, hi = stats.relative_interval(head, base, 0.95, 1.0, rng)
    assert delta == pytest.approx(-48.07, abs=0.01)
    assert lo < delta < hi and hi - lo < 6


# ---------------------------------------------------------------- noise simulation


@pytest.fixture(scope="module")
def sim():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bootstrap_simulation.py"
    spec = importlib.util.spec_from_file_location("bootstrap_simulation", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("scenario", ["gpu", "cpu"])
def test_aa_false_fail_rate_is_low(sim, scenario):
    counts = sim.trials(scenario, 300, 0.0, seed=11)
    assert counts[Outcome.FAIL] / 300 <= 0.02, counts


def test_seed_sized_slowdown_is_always_caught_on_gpu(sim):
    counts = sim.trials("gpu", 100, 1.0, seed=12)
    assert counts[Outcome.FAIL] == 100, counts


def test_seed_sized_slowdown_is_always_caught_on_cpu_with_three_repeats(sim):
    # one repeat per run on this noisy CPU catches it in about 99% of trials (benchmark output)
    counts = sim.trials("cpu", 100, 1.0, repeats=3, seed=13)
    assert counts[Outcome.FAIL] == 100, counts
