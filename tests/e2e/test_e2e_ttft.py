"""Compile-time regressions end to end on CPU with real vLLM servers (docs/compare.md#time-to-
first-token-and-grammar-compilation).

The test-only fixture tests/fixtures/slow_compile makes each guided request wait longer for
its grammar. Each A/B here is one round (its sequential design plans one look, so the first
look decides), on a plan shrunk to one level and the guided and free arms:

- 400 ms per grammar: fails on time to first token in round 1, TTFT leads the headline, and
  the verdict names the wait (vLLM's queue time beyond a free request's) as the grammar's;
- a fifth of that, 80 ms per grammar, on the guidance backend (`--backends guidance`: its own
  folder, OUT/guidance/, and backends.json): still fails on time to first token;
- the same 400 ms once per server start: absorbed by the warm-up, never fails.
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

pytestmark = pytest.mark.vllm

SLOW_COMPILE = FIXTURES / "slow_compile"
DELAY_MS = 400


def compile_ab(tmp_path_factory, name: str, delay_ms: float, when: str, *more: str):
    """`gate ab`, one round, head with the slow_compile fixture: (process, out folder)."""
    tmp = tmp_path_factory.mktemp(name)
    plan, marker = small_plan(tmp, **{"drain.enabled": False, "sweep.levels": [4],
                                      "sweep.arms": ["guided", "free"], "warmup.levels": [4]})
    out = tmp / "ab"
    proc = gate_subprocess("ab", "--plan", str(plan), "--rounds", "1", "--profile", "never",
                    "--out", str(out), "--head-env", f"PYTHONPATH={SLOW_COMPILE}",
                    "--head-env", f"GATE_FIXTURE_COMPILE_MS={delay_ms:g}",
                    "--head-env", f"GATE_FIXTURE_COMPILE_WHEN={when}", *more, timeout=900)
    assert wait_gone(marker) == []
    return proc, out


@pytest.fixture(scope="module")
def every_grammar(tiny_model_dir, tmp_path_factory):
    return compile_ab(tmp_path_factory, "compile-every", DELAY_MS, "every")


@pytest.fixture(scope="module")
def a_fifth(tiny_model_dir, tmp_path_factory):
    return compile_ab(tmp_path_factory, "compile-fifth", DELAY_MS / 5, "every",
                      "--backends", "guidance")


@pytest.fixture(scope="module")
def once_per_start(tiny_model_dir, tmp_path_factory):
    return compile_ab(tmp_path_factory, "compile-once", DELAY_MS, "first")


def ttft_failures(out) -> list[str]:
    verdict = load_verdict(out / "verdict.json")
    return [c.name for c in verdict.checks if c.outcome == Outcome.FAIL and "ttft" in c.name]


def test_a_slower_compile_fails_on_ttft_in_the_first_round(every_grammar):
    proc, out = every_grammar
    assert proc.returncode == EXIT_FAIL, proc.stdout[-3000:] + proc.stderr[-2000:]
    verdict = load_verdict(out / "verdict.json")
    assert verdict.rounds == 1
    assert verdict.headline.startswith("FAIL: time to first token: "), verdict.headline
    failed = [c for c in verdict.checks if c.outcome == Outcome.FAIL and "ttft" in c.name]
    assert "sweep.c4.ttft_p50_ms" in {c.name for c in failed}
    assert all(c.decided_at_round == 1 for c in failed)
    assert "[gate fixture]" in (out / "head" / "server.log").read_text()
    assert "[gate fixture]" not in (out / "base" / "server.log").read_text()


def test_the_wait_is_named_as_the_wait_for_the_grammar(every_grammar, tmp_path):
    _, out = every_grammar
    verdict = load_verdict(out / "verdict.json")
    named = [n for n in verdict.notes if n.startswith("where the wait is: TTFT p50 (guided, c=4)")]
    assert named and "waiting for the grammar" in named[0], verdict.notes
    head = load_results(out / "head")
    times = head.cells_of("sweep", "guided", 4)[0].server_times
    assert times is not None and times.requests > 0 and times.queue_ms > DELAY_MS * 0.8
    report = tmp_path / "report.md"
    proc = gate_subprocess("report", "--verdict", str(out / "verdict.json"), "--head", str(out / "head"),
                    "--base", str(out / "base"), "--out", str(report))
    assert proc.returncode == 0, proc.stderr
    text = report.read_text()
    assert "time to first token" in text.splitlines()[0]
    assert "#### Where the wait is" in text and "waiting for the grammar" in text


def test_a_fifth_of_that_compile_time_still_fails_on_ttft_with_guidance(a_fifth):
    proc, out = a_fifth
    assert proc.returncode == EXIT_FAIL, proc.stdout[-3000:] + proc.stderr[-2000:]
    index = load_index(out)
    assert [(e.backend, e.outcome) for e in index.backends] == [("guidance", Outcome.FAIL)]
    assert ttft_failures(out / "guidance"), load_verdict(out / "guidance" / "verdict.json").headline
    head = load_results(out / "guidance" / "head")
    assert head.plan.name == "cpu-smoke+guidance"
    assert head.plan.server.structured_outputs_backend == "guidance"
    assert '"backend": "guidance"' in " ".join(head.server.command)


def test_the_same_time_once_per_server_start_does_not_fail(once_per_start):
    proc, out = once_per_start
    assert proc.returncode in (EXIT_PASS, EXIT_INCONCLUSIVE), proc.stdout[-3000:]
    assert ttft_failures(out) == []
    # the fixture ran, once, in the warm-up
    assert "slowed by 400 ms (first)" in (out / "head" / "server.log").read_text()
