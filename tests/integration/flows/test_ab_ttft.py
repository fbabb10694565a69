"""Compile-time regressions through a real `gate ab` on the stand-in server
(support/fake_vllm.py; docs/compare.md#time-to-first-token-and-grammar-compilation): the head
waits FAKE_VLLM_COMPILE_MS for each guided request's grammar, in the server's queue, as a
slower grammar compiler would. Two A/Bs on a plan shrunk to one level and the guided and free
arms, with no calibration (one screening block judges gross effects only):

- 200 ms per grammar on the guidance backend (`--backends guidance`: its own folder,
  OUT/guidance/, and backends.json): fails on time to first token, TTFT leads the headline,
  and the verdict names the wait (the server's queue time beyond a free request's) as the
  grammar's;
- one second once per server start: absorbed by the warm-up, never fails (two blocks at most:
  from nothing it may pass or stay inconclusive). Its head differs
  from the base only in that one-time wait, so it is also a healthy A/B: profiled, its
  profile diff names nothing.

That the real vLLM's queue histogram holds the wait for a grammar is the README's A/B's to
show no more than this: it is read the same way from any server (gate/measure/server_metrics.py).
"""

from __future__ import annotations

import pytest
from support.cli import gate_subprocess
from support.vllm_helpers import stand_in_plan, wait_gone

from gate.core.errors import EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_PASS
from gate.flows.backends import load_index
from gate.judge.verdict import Outcome, load_verdict
from gate.measure.results import load_results
from gate.profile.data import load_build_profile
from gate.profile.diff_file import load_profile_diff

DELAY_MS = 1000


def compile_ab(tmp_path_factory, name: str, delay_ms: float, when: str, *more: str):
    """`gate ab` on the stand-in, the head's grammars slower: (process, out folder)."""
    tmp = tmp_path_factory.mktemp(name)
    plan, marker = stand_in_plan(tmp, **{"drain.enabled": False, "sweep.levels": [4],
                                         "sweep.arms": ["guided", "free"],
                                         "warmup.levels": [4],
                                         "thresholds.ttft_p50_pct": 25.0,
                                         "thresholds.ttft_wait_min_concurrency": 1})
    out = tmp / "ab"
    proc = gate_subprocess("ab", "--plan", str(plan), "--out", str(out),
                           "--head-env", f"FAKE_VLLM_COMPILE_MS={delay_ms:g}",
                           "--head-env", f"FAKE_VLLM_COMPILE_WHEN={when}", *more,
                           env={"GATE_CACHE_DIR": str(tmp / "cache")}, timeout=300)
    assert wait_gone(marker) == []
    return proc, out


@pytest.fixture(scope="module")
def a_fifth(tmp_path_factory):
    return compile_ab(tmp_path_factory, "compile-fifth", DELAY_MS / 5, "every",
                      "--backends", "guidance", "--profile", "never")


@pytest.fixture(scope="module")
def once_per_start(tmp_path_factory):
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
    assert not [c for c in verdict.checks if c.outcome == Outcome.FAIL and "tpot" in c.name]
    head = load_results(out / "guidance" / "head")
    assert head.plan.name == "cpu-smoke+guidance"
    assert head.plan.server.structured_outputs_backend == "guidance"
    assert '"backend": "guidance"' in " ".join(head.server.command)
    assert head.server.env_overrides["FAKE_VLLM_COMPILE_MS"] == "200"
    assert "FAKE_VLLM_COMPILE_MS" not in load_results(out / "guidance" / "base").server.env_overrides


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
    # the wait was there, once, in the warm-up: the head's first guided request waited for it
    warm = [r for r in head.records if r.phase == "warmup" and r.arm == "guided"]
    assert warm and max(r.ttft_s for r in warm) > DELAY_MS / 1000 * 0.9
    measured = [r.ttft_s for r in head.records if r.phase == "sweep" and r.arm == "guided"]
    assert measured and max(measured) < DELAY_MS / 1000 / 2
    verdict = load_verdict(out / "verdict.json")
    assert not [c for c in verdict.checks if c.outcome == Outcome.FAIL]


def test_both_builds_are_profiled_and_a_healthy_diff_names_nothing(once_per_start):
    _, out = once_per_start
    for side in ("base", "head"):
        profile = load_build_profile(out / side / "profile")
        assert [p.role for p in profile.processes] == ["APIServer", "EngineCore"]
        assert len(profile.windows) == 3 and all(w.output_tokens > 0 for w in profile.windows)
        assert (out / side / "profile" / "profile.speedscope.json").is_file()
    diff = load_profile_diff(out / "profile-diff")
    assert diff.named == [], (out / "profile-diff" / "profile-diff.txt").read_text()
    assert (out / "profile-diff" / "diff-flamegraph.svg").read_text().startswith("<svg")
