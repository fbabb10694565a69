"""Compile-time regressions end to end on CPU with real vLLM servers (docs/compare.md#time-to-
first-token-and-grammar-compilation).

The test-only fixture tests/fixtures/slow_compile makes each guided request wait longer for
its grammar. Two A/Bs on a plan shrunk to one level and the guided and free arms, judging the
guided TTFT p50 and the wait at that level (cpu-smoke judges TTFT through the wait at c=8 only;
this runner may have no calibration for the plan: the first block's look for gross effects
then decides what it can):

- 200 ms per grammar, a fifth of a one-second compile, on the guidance backend
  (`--backends guidance`: its own folder, OUT/guidance/, and backends.json): fails on time
  to first token, TTFT leads the headline, and the verdict names the wait (vLLM's queue time
  beyond a free request's) as the grammar's. The size is for the slowest runner: the first
  block fails a check only if every round is past its threshold by a further 50% (1.875x for
  the 25% TTFT threshold), and with the runner slowed twice (benchmarks/slowed_runner.py) a
  guided request's TTFT at c=4 is 65-80 ms, so 80 ms (a fifth of the fixture's default 400 ms)
  came out +85% in one round: not gross enough to fail without a calibration;
- one second once per server start: absorbed by the warm-up, never fails (two blocks at most:
  from nothing it may pass or stay inconclusive). Its head differs from the base only in that
  one-time delay, so it is also the suite's healthy A/B: profiled, its profile diff names
  nothing.
"""

from __future__ import annotations

import pytest
from support.cli import gate_subprocess
from support.paths import FIXTURES
from support.vllm_helpers import small_plan, wait_gone

from gate.core.errors import EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_PASS
from gate.flows.backends import load_index
from gate.judge.verdict import Outcome, load_verdict
from gate.measure.results import load_results
from gate.profile.data import load_build_profile
from gate.profile.diff_file import load_profile_diff

pytestmark = pytest.mark.vllm

SLOW_COMPILE = FIXTURES / "slow_compile"
DELAY_MS = 1000


def compile_ab(tmp_path_factory, name: str, delay_ms: float, when: str, *more: str):
    """`gate ab` with the slow_compile fixture on the head: (process, out folder)."""
    tmp = tmp_path_factory.mktemp(name)
    plan, marker = small_plan(tmp, **{"drain.enabled": False, "sweep.levels": [4],
                                      "sweep.arms": ["guided", "free"], "warmup.levels": [4],
                                      "thresholds.ttft_p50_pct": 25.0,
                                      "thresholds.ttft_wait_min_concurrency": 1})
    out = tmp / "ab"
    proc = gate_subprocess("ab", "--plan", str(plan), "--out", str(out),
                           "--head-env", f"PYTHONPATH={SLOW_COMPILE}",
                           "--head-env", f"GATE_FIXTURE_COMPILE_MS={delay_ms:g}",
                           "--head-env", f"GATE_FIXTURE_COMPILE_WHEN={when}", *more,
                           env={"GATE_CACHE_DIR": str(tmp / "cache")}, timeout=900)
    assert wait_gone(marker) == []
    return proc, out


@pytest.fixture(scope="module")
def a_fifth(tiny_model_dir, tmp_path_factory):
    return compile_ab(tmp_path_factory, "compile-fifth", DELAY_MS / 5, "every",
                      "--backends", "guidance", "--profile", "never")


@pytest.fixture(scope="module")
def once_per_start(tiny_model_dir, tmp_path_factory):
    return compile_ab(tmp_path_factory, "compile-once", DELAY_MS, "first", "--profile", "always",
                      "--max-rounds", "4")


def ttft_failures(out) -> list[str]:
    verdict = load_verdict(out / "verdict.json")
    return [c.name for c in verdict.checks if c.outcome == Outcome.FAIL and "ttft" in c.name]


def test_a_slower_compile_fails_on_ttft_on_the_guidance_backend(a_fifth):
    proc, out = a_fifth
    assert proc.returncode == EXIT_FAIL, proc.stdout[-3000:] + proc.stderr[-2000:]
    index = load_index(out)
    assert [(e.backend, e.outcome) for e in index.backends] == [("guidance", Outcome.FAIL)]
    verdict = load_verdict(out / "guidance" / "verdict.json")
    assert verdict.headline.startswith("FAIL: time to first token: "), verdict.headline
    assert "sweep.c4.ttft_p50_ms" in ttft_failures(out / "guidance")
    head = load_results(out / "guidance" / "head")
    assert head.plan.name == "cpu-smoke+guidance"
    assert head.plan.server.structured_outputs_backend == "guidance"
    assert '"backend": "guidance"' in " ".join(head.server.command)
    logs = {side: " ".join(p.read_text() for p in (out / "guidance" / side).glob("*/server.log"))
            for side in ("base", "head")}
    assert "[gate fixture]" in logs["head"] and "[gate fixture]" not in logs["base"]


def test_the_wait_is_named_as_the_wait_for_the_grammar(a_fifth, tmp_path):
    _, out = a_fifth
    verdict = load_verdict(out / "guidance" / "verdict.json")
    named = [n for n in verdict.notes if n.startswith("where the wait is: TTFT p50 (guided, c=4)")]
    assert named and "waiting for the grammar" in named[0], verdict.notes
    head = load_results(out / "guidance" / "head")
    times = head.cells_of("sweep", "guided", 4)[0].server_times
    assert times is not None and times.requests > 0 and times.queue_ms > DELAY_MS / 5 * 0.8
    report = tmp_path / "report.md"
    proc = gate_subprocess("report", "--backends", str(out), "--out", str(report))
    assert proc.returncode == 0, proc.stderr
    text = report.read_text()
    assert "time to first token" in text and "#### Where the wait is" in text
    assert "waiting for the grammar" in text


def test_the_same_time_once_per_server_start_never_fails(once_per_start):
    proc, out = once_per_start
    assert proc.returncode in (EXIT_PASS, EXIT_INCONCLUSIVE), \
        proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and not proc.stdout.lstrip().startswith("FAIL")
    head = load_results(out / "head")
    assert not [c for c in head.cells if c.failed]
    logs = " ".join(p.read_text() for p in (out / "head").glob("*/server.log"))
    assert f"slowed by {DELAY_MS:g} ms (first)" in logs  # the fixture ran, once, in the warm-up
    verdict = load_verdict(out / "verdict.json")
    assert not [c for c in verdict.checks if c.outcome == Outcome.FAIL]


def test_every_serving_process_is_profiled_and_a_healthy_diff_names_nothing(once_per_start):
    _, out = once_per_start
    profile = load_build_profile(out / "head" / "profile")
    assert [p.role for p in profile.processes] == ["APIServer", "EngineCore", "Worker"]
    assert len(profile.windows) == 5 and all(w.output_tokens > 0 for w in profile.windows)
    assert (out / "head" / "profile" / "profile.speedscope.json").is_file()
    diff = load_profile_diff(out / "profile-diff")
    assert diff.named == [], (out / "profile-diff" / "profile-diff.txt").read_text()
    assert (out / "profile-diff" / "diff-flamegraph.svg").read_text().startswith("<svg")
