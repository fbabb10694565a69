"""The README's CPU commands, run as written (from a folder that has the repository's tests/),
each with the exit code the README gives it; then what the A/B among them produced."""

from __future__ import annotations

import json

import pytest
from support.readme import readme_commands
from support.vllm_helpers import fixture_ms_per_row

from gate.judge.verdict import Outcome, load_verdict
from gate.profile.diff_file import load_profile_diff

pytestmark = pytest.mark.vllm



def test_the_block_is_found_and_every_command_is_a_gate_command():
    commands = readme_commands()
    assert len(commands) >= 5 and all(c.startswith("gate ") for c, _ in commands)


def test_every_readme_command_exits_as_the_readme_says(readme_run):
    _, runs = readme_run
    for command, allowed, proc in runs:
        assert proc.returncode in allowed, (
            f"{command}: exit {proc.returncode}, README says {sorted(allowed)}\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
        assert "Traceback" not in proc.stderr, command


def test_the_ab_against_the_fixture_fails_on_the_guided_path_and_names_the_function(readme_run):
    folder, _ = readme_run
    verdict = load_verdict(folder / "gate-ab" / "verdict.json")
    assert verdict.outcome == Outcome.FAIL and verdict.mode == "ab"
    failing = {c.name for c in verdict.checks if c.outcome == Outcome.FAIL}
    assert "drain.req_per_min" in failing or "sweep.c8.tpot_p50_ms" in failing
    assert verdict.rounds >= 1 and verdict.runner_seconds["wall"] > 0
    # the free arm is untouched by the fixture: its TPOT moved far less than the guided one
    head = json.loads((folder / "gate-ab" / "head" / "results.json").read_text())
    assert head["server"]["env_overrides"]["PYTHONPATH"].endswith("tests/fixtures/slow_bitmask")
    diff = load_profile_diff(folder / "gate-ab" / "profile-diff")
    top = max(diff.functions, key=lambda f: f.self_time.diff if f.self_time.significant else 0)
    assert "apply_grammar_bitmask" in top.name and top.self_time.significant
    # The profile's guided load runs at the drain's concurrency: each output token is one
    # guided row of a step, so the added time per 1k tokens is what the fixture says it burnt
    # per row (at the batch sizes that load runs, c/2..c), times 1000.
    # the profiled server is the last block's (a fresh pair per block)
    last = sorted((folder / "gate-ab" / "head").glob("block*/server.log"))[-1]
    burnt = fixture_ms_per_row(last)
    c = head["plan"]["drain"]["concurrency"]
    per_row = [ms for rows, ms in burnt.items() if c // 2 <= rows <= c]
    assert per_row, f"the fixture logged no burn at {c // 2}..{c} rows: {burnt}"
    assert min(per_row) * 1000 / 1.5 <= top.self_time.diff <= max(per_row) * 1000 * 1.5
    report = (folder / "gate-ab" / "report.md").read_text()
    assert report.startswith("### ❌ FAIL") and "Where the head spends more time" in report


def test_the_single_run_is_sound_and_streams_were_whole(readme_run):
    folder, _ = readme_run
    results = json.loads((folder / "gate-out" / "results.json").read_text())
    assert results["status"] == "complete", results["errors"]
    assert all(c["coalesced_requests"] == 0 for c in results["cells"])
    bench = json.loads((folder / "gate-out" / "bench.json").read_text())
    assert bench["completed"] > 0 and bench["max_concurrency"] == 8
    assert (folder / "gate-out" / "report.md").read_text().startswith("### ")
