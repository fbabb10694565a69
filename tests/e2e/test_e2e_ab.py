"""A/B end to end on CPU with the real vLLM server: a healthy build against the same build
with a test-only regression overlay (tests/fixtures/slow_bitmask: host-side cost on every
engine step that holds structured-output rows, sized to halve guided throughput), and a
healthy build against itself."""

from __future__ import annotations

import json

import pytest
from support.vllm_helpers import FIXTURE_OVERLAY, run_gate, small_plan, wait_gone

from gate.errors import EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_PASS
from gate.results import load_results
from gate.verdict import Outcome, load_verdict

pytestmark = pytest.mark.vllm

AB_PLAN = {"drain.requests": 64, "drain.concurrency": 32, "sweep.levels": [8, 16],
           "sweep.window_s": 3}


def gate_ab(tmp_path, *extra):
    plan, marker = small_plan(tmp_path, **AB_PLAN)
    out = tmp_path / "ab"
    proc = run_gate("ab", "--plan", str(plan), "--rounds", "2", "--out", str(out), *extra,
                    timeout=1500)
    assert wait_gone(marker) == []
    return proc, out


@pytest.fixture(scope="module")
def fixture_ab(tiny_model_dir, tmp_path_factory):
    return gate_ab(tmp_path_factory.mktemp("ab-fixture"),
                   "--head-env", f"PYTHONPATH={FIXTURE_OVERLAY}")


def test_ab_catches_the_guided_slowdown(fixture_ab):
    proc, out = fixture_ab
    assert proc.returncode == EXIT_FAIL, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.startswith("FAIL:")
    verdict = load_verdict(out / "verdict.json")
    assert verdict.outcome == Outcome.FAIL and verdict.mode == "ab"
    drain = next(c for c in verdict.checks if c.name == "drain.req_per_min")
    assert drain.outcome == Outcome.FAIL and drain.delta_pct < -25
    # Each build ran on its own fresh servers, interleaved: base r1, head r1, base r2, head r2.
    for arm in ("base", "head"):
        for r in (1, 2):
            log = (out / arm / f"round{r}" / "server.log").read_text()
            assert ("[gate fixture]" in log) == (arm == "head")
    head = load_results(out / "head")
    assert head.server.env_overrides == {"PYTHONPATH": str(FIXTURE_OVERLAY)}
    assert head.plan.repeats == 2 and {c.repeat for c in head.cells} == {0, 1}


def test_ratio_check_alone_flags_the_fixture_without_a_baseline(fixture_ab, tmp_path):
    _, out = fixture_ab
    head = run_gate("compare", str(out / "head"), "--out", str(tmp_path / "head.json"))
    assert head.returncode == EXIT_FAIL, head.stdout
    verdict = json.loads((tmp_path / "head.json").read_text())
    assert verdict["mode"] == "absolute"
    failing = [c["name"] for c in verdict["checks"] if c["outcome"] == "fail"]
    assert failing and all("ratio" in name for name in failing)
    base = run_gate("compare", str(out / "base"), "--out", str(tmp_path / "base.json"))
    assert base.returncode in (EXIT_PASS, EXIT_INCONCLUSIVE), base.stdout


def test_report_names_the_regression(fixture_ab, tmp_path):
    _, out = fixture_ab
    report = tmp_path / "report.md"
    proc = run_gate("report", "--verdict", str(out / "verdict.json"), "--head", str(out / "head"),
                    "--base", str(out / "base"), "--out", str(report), "--chart",
                    str(tmp_path / "chart.png"))
    assert proc.returncode == 0, proc.stderr
    text = report.read_text()
    assert text.splitlines()[0].startswith("### ❌ FAIL")
    assert "Drain req/min" in text or "drain req/min" in text
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_healthy_against_healthy_never_fails(tiny_model_dir, tmp_path):
    proc, out = gate_ab(tmp_path)
    assert proc.returncode in (EXIT_PASS, EXIT_INCONCLUSIVE), proc.stdout[-3000:] + proc.stderr[-2000:]
    verdict = load_verdict(out / "verdict.json")
    assert verdict.outcome in (Outcome.PASS, Outcome.INCONCLUSIVE)
    assert not [c for c in verdict.checks if c.outcome == Outcome.FAIL]
