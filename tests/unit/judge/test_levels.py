"""gate/judge/levels.py: the per-look levels of the sequential test, from the table
benchmarks/look_levels.py generated: its weights, that the table is of these constants, that
a fresh simulation reproduces it, and the lookup's safe side."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest

from gate.judge import levels


def table() -> dict:
    return json.loads(resources.files("gate.judge").joinpath(levels.TABLE).read_text())


def test_the_weights_start_at_the_first_look_and_add_up_to_a_finite_total():
    w = levels.look_weights()
    assert list(w[: levels.FIRST_LOOK - 1]) == [0.0] * (levels.FIRST_LOOK - 1)
    assert list(w[levels.FIRST_LOOK - 1: levels.FLAT_LOOKS]) == [1.0] * (
        levels.FLAT_LOOKS - levels.FIRST_LOOK + 1)
    assert w[11] == pytest.approx((levels.FLAT_LOOKS / 12) ** 2)
    # however long a design runs, the weights beyond the horizon add little
    assert levels.look_weights(100_000).sum() < levels.look_weights().sum() * 1.1


def test_the_table_is_of_these_constants():
    t = table()
    assert (t["horizon"], t["first_look"], t["flat_looks"]) == (
        levels.LOOK_HORIZON, levels.FIRST_LOOK, levels.FLAT_LOOKS)
    assert set(t["scales"]) == {"1", "2"} and "0" in t["scales"]["1"]


@pytest.mark.parametrize("prior_df", [0, 10])
def test_a_fresh_simulation_reproduces_the_table(prior_df):
    """60,000 new paths (another seed): the scale at a 1% error within the simulations'
    precision of the tabled one."""
    fresh = np.quantile(levels.crossing_scale(prior_df, 1, 60_000, seed=7), 0.01)
    assert levels.level_scale(prior_df, 1, 0.01) == pytest.approx(fresh, rel=0.12)


def test_a_change_at_the_end_crosses_at_the_tabled_rate():
    """Standard normal units through the levels themselves: the share of paths that cross
    at some look is the error asked for."""
    scale = levels.crossing_scale(0, 1, 40_000, seed=11)
    g = levels.level_scale(0, 1, 0.05)
    assert np.mean(scale < g) == pytest.approx(0.05, abs=0.006)


def test_levels_cut_at_a_shorter_horizon_give_each_look_more():
    """Fewer looks share the error, so at the same error each gets a larger level; the
    table's own horizon is the default."""
    full = levels.crossing_scale(0, 1, 40_000, seed=3)
    short = levels.crossing_scale(0, 1, 40_000, seed=3, horizon=5)
    assert np.quantile(short, 0.01) > 1.2 * np.quantile(full, 0.01)
    assert np.array_equal(levels.crossing_scale(0, 1, 2_000, seed=3, horizon=levels.LOOK_HORIZON),
                          levels.crossing_scale(0, 1, 2_000, seed=3))


def test_the_lookup_takes_the_safe_side_and_refuses_what_it_does_not_hold():
    tabled = sorted(int(k) for k in table()["scales"]["1"])
    assert 7 not in tabled and 6 in tabled
    assert levels.level_scale(7, 1, 0.01) == levels.level_scale(6, 1, 0.01)
    assert levels.level_scale(500, 1, 0.01) == levels.level_scale(tabled[-1], 1, 0.01)
    assert levels.level_scale(0, 1, 0.001) < levels.level_scale(0, 1, 0.01)
    assert levels.look_levels(0, 1, 0.01)[0] == 0.0  # no look at the first block
    with pytest.raises(ValueError, match="outside the levels' table"):
        levels.level_scale(0, 1, 1e-7)
