"""gate.plan.cost: a plan's runner time from its own cells and expectations, and the figures
docs/runner-time.md quotes, kept equal to it."""

from __future__ import annotations

import pytest
from support.paths import REPO_ROOT

from gate.core.errors import GateError
from gate.plan.cost import estimate
from gate.plan.spec import load_plan

DOCS = (REPO_ROOT / "docs" / "runner-time.md").read_text()


def test_a_cell_is_warm_in_window_and_tail():
    pr = estimate(load_plan("a100-gemma4-26b-pr"))  # R 20 s, window 15 s, 64 requests
    assert pr.build.sweep_s == 2 * (20 + 20 + 20)  # the request count binds, not the 15 s
    assert pr.build.warmup_s == 2 * 20  # one wave of 8 at 8 in flight, per arm


def test_per_round_pays_starts_every_round_persistent_once():
    pr, pair = estimate(load_plan("a100-gemma4-26b-pr")), estimate(load_plan("a100-gemma3-1b-pair"))
    assert pr.ab_s(2) == 2 * pr.ab_s(1)
    assert pair.ab_s(2) - pair.ab_s(1) == 2 * pair.build.cells_s
    assert pair.ab_s(1) == 2 * (pair.startup_s + pair.build.warmup_s + pair.build.cells_s)


def test_the_nightly_drain_is_littles_law():
    nightly = estimate(load_plan("a100-gemma4-26b"))
    assert nightly.build.drain_s == 2000 / 64 * 20
    assert nightly.run_s() == 180 + nightly.build.warmup_s + 625 + 10 * 70


@pytest.mark.parametrize("name", ["a100-gemma4-26b-pr", "a100-gemma3-1b-pair"])
def test_docs_quote_the_computed_tier_figures(name):
    plan = load_plan(name)
    c = estimate(plan)
    row = (f"| `{name}` | {plan.ab.servers} | {c.request_s:g} s | {c.startup_s:g} s | "
           f"{c.build.warmup_s:g} s warm-up + {c.build.cells_s:g} s of cells | "
           f"{c.ab_s(1) / 60:.1f} / {c.ab_s(2) / 60:.1f} / {c.ab_s(4) / 60:.1f} min |")
    assert row in DOCS


def test_docs_quote_the_nightly_run():
    c = estimate(load_plan("a100-gemma4-26b"))
    assert f"**~{c.run_s() / 60:.1f} minutes with its one server start**" in DOCS
    assert f"**{c.build.drain_s:g} s**" in DOCS and f"**{c.build.sweep_s:g} s**" in DOCS


def test_a_plan_without_expectations_has_no_computed_cost():
    with pytest.raises(GateError, match="states no workload.expected.request_s"):
        estimate(load_plan("b300-gemma4-31b"))
