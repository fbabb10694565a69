"""A/B end to end on CPU with real vLLM servers.

Against the test-only regression overlay (tests/fixtures/slow_bitmask: every engine step that
holds structured-output rows burns as long again as a healthy step of its size, measured on this
runner), the A/B is the README's own (`readme_run`): it must fail on the guided path, leave the
free arm alone, profile both builds and name the slowed function, whether this runner has a
calibration or not (the first block's look for gross effects: the fixture's effect is gross).
Every expectation is stated relative to what the base build measured in the same run, so that
it holds on a slow runner as on a fast one. Both builds are profiled, every one of vLLM's
serving processes. The healthy A/B that must never fail, and whose profile diff names nothing,
is tests/integration/flows/test_ab_ttft.py's, on the stand-in server.
"""

from __future__ import annotations

import json
import statistics

import pytest
from support.cli import gate_subprocess
from support.vllm_helpers import FIXTURE_STEP_FRACTION

from gate.core.errors import EXIT_FAIL
from gate.flows.ab_state import STATE_FILE, load_state
from gate.judge.verdict import Outcome, load_verdict
from gate.measure.results import CellKey, load_results
from gate.profile.data import load_build_profile

pytestmark = pytest.mark.vllm


def test_both_servers_ran_the_whole_ab_and_only_the_head_had_the_fixture(readme_run):
    folder, _ = readme_run
    out = folder / "gate-ab"
    state = load_state(out / STATE_FILE)
    for arm in ("base", "head"):
        logs = sorted((out / arm).glob("block*/server.log"))  # a fresh server per block
        assert logs and all(("[gate fixture]" in log.read_text()) == (arm == "head")
                            for log in logs)
        results = load_results(out / arm)
        assert results.sequential_rounds == state.design.max_rounds <= results.plan.ab.max_rounds
        # every CPU server: the fingerprint and the doctor agree on the V1 runner
        assert results.fingerprint.model_runner == results.doctor.served.model_runner == "v1"
        assert {c.repeat for c in results.cells} == set(range(results.plan.repeats))
    verdict = load_verdict(out / "verdict.json")
    assert verdict.rounds == load_results(out / "head").plan.repeats == state.rounds_done
    assert state.finished and state.outcome == Outcome.FAIL
    assert set(verdict.runner_seconds) >= {"startup", "warmup", "sweep", "profile", "wall"}


def test_a_round_measures_what_the_checks_read_and_the_drain_window_once(readme_run):
    """cpu-smoke's rounds (ab.cells: judged): no free c=4 cell (no check reads it), and the
    sweep's guided c=8 cell is the drain's window under its own key, its requests recorded once
    (under the drain); the free c=8 cell, which the guided/free checks read, has its own."""
    folder, _ = readme_run
    for arm in ("base", "head"):
        results = load_results(folder / "gate-ab" / arm)
        index = results.index()
        assert not results.cells_of("sweep", "free", 4)
        assert len(results.cells_of("sweep", "free", 8)) == results.plan.repeats
        for r in range(results.plan.repeats):
            drain = index.cell(CellKey("drain", "guided", 8, r))
            twin = index.cell(CellKey("sweep", "guided", 8, r))
            free = index.cell(CellKey("sweep", "free", 8, r))
            assert drain is not None and twin is not None and free is not None
            assert (drain.window_of, twin.window_of, free.window_of) == (None, "drain", None)
            assert (twin.tpot_ms, twin.request_throughput) == (drain.tpot_ms,
                                                               drain.request_throughput)
            assert not index.records(twin.key)
            assert len(index.records(drain.key)) == drain.requests > 0
            assert len(index.records(free.key)) == free.requests > 0


def test_the_fixture_slows_the_guided_arm_only(readme_run):
    """A guided step that takes (1 + fraction) times as long moves guided TPOT by about the
    fraction; at least half of it must show, and the free arm must move far less."""
    folder, _ = readme_run
    verdict = load_verdict(folder / "gate-ab" / "verdict.json")
    guided = next(c for c in verdict.checks if c.name == "sweep.c8.tpot_p50_ms")
    assert guided.delta_pct > 100 * FIXTURE_STEP_FRACTION / 2
    head, base = (load_results(folder / "gate-ab" / arm) for arm in ("head", "base"))
    free = [h.tpot_ms.p50 / b.tpot_ms.p50 for h, b in zip(
        head.cells_of("sweep", "free", 8), base.cells_of("sweep", "free", 8), strict=True)]
    # free moved far less than guided, both over the rounds (the check's change is the rounds'
    # mean too): on a runner twice as slow one free cell of two moved +65%, the other +10%
    assert statistics.geometric_mean(free) < 1 + guided.delta_pct / 100 / 2


def test_the_head_alone_fails_a_guided_free_bound_set_from_the_base(readme_run, tmp_path):
    """The absolute guided/free bound, judged on the head alone. A CPU's healthy ratio is a
    property of the machine (docs/compare.md), so the bound is the base build's own ratio in
    this run: the head, about (1 + fraction) times it, must be past it even with the wide
    interval of a runner without a calibration (about x/1.4 with two repeats)."""
    folder, _ = readme_run
    base = load_results(folder / "gate-ab" / "base")
    healthy = [r.tpot_p50_ratio for r in base.ratios if r.concurrency == 8 and r.tpot_p50_ratio]
    bound = sum(healthy) / len(healthy)
    proc = gate_subprocess("compare", str(folder / "gate-ab" / "head"), "--out",
                    str(tmp_path / "head.json"), "--threshold",
                    f"guided_free_tpot_ratio={bound:.3f}")
    assert proc.returncode == EXIT_FAIL, proc.stdout
    verdict = json.loads((tmp_path / "head.json").read_text())
    failing = [c["name"] for c in verdict["checks"] if c["outcome"] == "fail"]
    assert verdict["mode"] == "absolute" and failing
    assert all(name.startswith("bound.") for name in failing)


def test_every_serving_process_of_both_builds_was_profiled(readme_run):
    folder, _ = readme_run
    for arm in ("base", "head"):
        profile = load_build_profile(folder / "gate-ab" / arm / "profile")
        assert [p.role for p in profile.processes] == ["APIServer", "EngineCore", "Worker"]
        assert len(profile.windows) >= 2 and all(w.output_tokens > 0 for w in profile.windows)
        assert (folder / "gate-ab" / arm / "profile" / "profile.speedscope.json").is_file()
