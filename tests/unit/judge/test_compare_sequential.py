"""gate compare on A/B rounds: paired log ratios, the noise profile as prior, the looks of a
sequential A/B replayed round by round, and the runner doctor's findings."""

from __future__ import annotations

import pytest
from support.factories import cell, fingerprint, gpu_plan, make_results

from gate.judge.compare import compare_results
from gate.judge.noise import CheckNoise, Noise, NoiseCalibration, NoiseProvenance
from gate.judge.verdict import Outcome
from gate.plan.thresholds import Thresholds
from gate.runner.doctor import DoctorReport, Finding, Severity

T = Thresholds()
PLAN = gpu_plan(levels=(8,), repeats=3)


def rounds(tpot_by_round: list[float], sequential: int | None = 6, label: str = "head"):
    cells = []
    for r, tpot in enumerate(tpot_by_round):
        cells += [cell("drain", "guided", 64, r, rpm=233.0),
                  cell("sweep", "guided", 8, r, tpot_p50=tpot),
                  cell("sweep", "free", 8, r, tpot_p50=10.0)]
    res = make_results(cells, plan=gpu_plan(levels=(8,), repeats=len(tpot_by_round)),
                       label=label)
    return res.model_copy(update={"sequential_rounds": sequential,
                                  "plan_hash": PLAN.measurement_hash()})


def profile(sigma: float = 0.02, pairs: int = 20) -> Noise:
    checks = {name: CheckNoise(sigma=sigma, pairs=pairs, sigma_single=sigma)
              for name in ("drain.req_per_min", "drain.output_tok_s", "sweep.c8.tpot_p50_ms",
                           "sweep.c8.tpot_p99_ms", "sweep.c8.itl_p99_ms", "ratio.c8.tpot_p50")}
    p = NoiseCalibration(plan=PLAN.name, plan_hash=PLAN.measurement_hash(),
                     hardware_key="1x NVIDIA A100-SXM4-80GB",
                     provenance=NoiseProvenance(date="2026-11-30", gate_version="0.1.0"),
                     checks=checks)
    return Noise(p, "noise profile test.yaml (2026-11-30)")


def check(v, name):
    return next(c for c in v.checks if c.name == name)


def test_a_2x_slowdown_is_decided_in_the_first_round_and_stays_decided():
    base, head = rounds([10.0, 10.1, 9.9]), rounds([20.0, 10.0, 10.0])
    v = compare_results(head, base, None, T, noise=profile())
    tpot = check(v, "sweep.c8.tpot_p50_ms")
    assert tpot.outcome == Outcome.FAIL and tpot.decided_at_round == 1
    assert v.outcome == Outcome.FAIL and v.rounds == 3
    assert "noise profile test.yaml" in tpot.interval_source and "3 paired round(s)" in \
        tpot.interval_source
    assert "noise profile test.yaml" in v.noise_profile


def test_repeats_judged_together_when_not_measured_sequentially():
    base, head = rounds([10.0, 10.1, 9.9], None), rounds([12.0, 12.2, 11.8], None)
    v = compare_results(head, base, None, T, noise=profile())
    tpot = check(v, "sweep.c8.tpot_p50_ms")  # one look at all three rounds: +20%
    assert tpot.outcome == Outcome.FAIL and tpot.decided_at_round == 1
    assert tpot.delta_pct == pytest.approx(20.0, abs=0.5) and tpot.head_n == 3


def test_rounds_noisier_than_the_profile_say_so():
    base, head = rounds([10.0, 10.1, 9.9], None), rounds([20.0, 10.0, 10.0], None)
    tpot = check(compare_results(head, base, None, T, noise=profile()), "sweep.c8.tpot_p50_ms")
    assert tpot.outcome == Outcome.INCONCLUSIVE
    assert "noisier than its noise profile" in tpot.note


def test_an_aa_run_passes_once_its_interval_is_inside_every_threshold():
    base = rounds([10.0, 10.1, 9.95, 10.05])
    head = rounds([10.05, 10.0, 10.0, 9.95])
    v = compare_results(head, base, None, T, noise=profile(0.01))
    assert v.outcome == Outcome.PASS, v.headline
    assert all(c.decided_at_round for c in v.checks if c.kind == "relative")


def test_the_fallback_prior_is_named_when_there_is_no_profile():
    v = compare_results(rounds([20.0]), rounds([10.0]), None, T)
    assert "fallback constant run_noise_pct=1%" in check(v, "sweep.c8.tpot_p50_ms").interval_source


def test_an_oversubscribed_runner_is_an_error_with_the_fix_not_a_fail():
    finding = Finding(id="server.torch_pool_oversubscribed", severity=Severity.invalidating,
                      title="VLLM::EngineCore runs 8 torch threads on 2 CPUs", detail="",
                      fix="set OMP_NUM_THREADS=2 in the server's environment")
    head = rounds([20.0]).model_copy(update={"doctor": DoctorReport(findings=[finding])})
    v = compare_results(head, rounds([10.0]), None, T)
    assert v.outcome == Outcome.ERROR
    assert any("set OMP_NUM_THREADS=2" in e and e.startswith("head runner:") for e in v.errors)


def test_doctor_warnings_reach_the_verdict():
    finding = Finding(id="cpu.governor", severity=Severity.warning, title="governor powersave",
                      detail="", fix="set the performance governor")
    head = rounds([10.0]).model_copy(update={"doctor": DoctorReport(findings=[finding]),
                                             "fingerprint": fingerprint("NVIDIA A100-SXM4-80GB")})
    v = compare_results(head, rounds([10.0]), None, T)
    assert "head runner: governor powersave; fix: set the performance governor" in v.warnings
