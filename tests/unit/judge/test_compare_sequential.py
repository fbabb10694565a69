"""gate compare on A/B rounds: paired log ratios grouped into blocks of one server pair, the
calibration as prior, the looks of gate ab's sequential test replayed from the files, and the
runner doctor's findings."""

from __future__ import annotations

import math

import pytest
from support.calibrations import noise_for_results
from support.factories import cell, fingerprint, gpu_plan, make_results

from gate.judge.compare import ABReference, compare_results
from gate.judge.noise import Noise
from gate.judge.verdict import Outcome
from gate.plan.thresholds import Thresholds
from gate.report.terminal import render_verdict
from gate.runner.doctor import DoctorReport, Finding, Severity

T = Thresholds()
PLAN = gpu_plan(levels=(8,), repeats=3)


def rounds(tpot_by_round: list[float], sequential: int | None = 8, label: str = "head"):
    """A/B results of `gate ab`: one round per value (guided TPOT p50 at 8, free at 10 ms)."""
    cells = []
    for r, tpot in enumerate(tpot_by_round):
        cells += [cell("drain", "guided", 64, r, rpm=233.0),
                  cell("sweep", "guided", 8, r, tpot_p50=tpot),
                  cell("sweep", "free", 8, r, tpot_p50=10.0)]
    res = make_results(cells, plan=gpu_plan(levels=(8,), repeats=len(tpot_by_round)),
                       label=label)
    return res.model_copy(update={"sequential_rounds": sequential,
                                  "plan_hash": PLAN.measurement_hash()})


CALIBRATED = noise_for_results(rounds([10.0]), between=0.01, within=0.015)


def ab(head, base, noise: Noise = CALIBRATED):
    return compare_results(head, ABReference(base), T, noise=noise)


def check(v, name):
    return next(c for c in v.checks if c.name == name)


def test_a_2x_slowdown_fails_at_the_first_block_and_stays_decided():
    """A gross effect (every round of the first block past the threshold by a further 50%)
    fails when the block ends, and later calm rounds do not undo it."""
    base, head = rounds([10.0, 10.1, 9.9, 10.0]), rounds([20.0, 20.2, 10.0, 10.0])
    v = ab(head, base)
    tpot = check(v, "sweep.c8.tpot_p50_ms")
    assert tpot.outcome == Outcome.FAIL and tpot.decided_at_round == 2
    assert v.outcome == Outcome.FAIL and v.rounds == 4
    assert tpot.interval_is_range  # the first block's rounds, not an interval
    assert "test calibration" in v.noise_profile
    assert "at most 4 blocks" in v.method
    one_round = ab(rounds([20.0]), rounds([10.0]))  # a block is not yet whole
    assert check(one_round, "sweep.c8.tpot_p50_ms").outcome == Outcome.INCONCLUSIVE


def test_a_healthy_ab_passes_from_the_second_block_not_before():
    base, head = rounds([10.0, 10.1, 9.95, 10.05]), rounds([10.05, 10.0, 10.0, 9.95])
    v = ab(head, base)
    assert v.outcome == Outcome.PASS, v.headline
    assert {c.decided_at_round for c in v.checks
            if c.kind == "relative" and not c.name.startswith("spread.")} == {4}
    first = ab(rounds([10.05, 10.0]), rounds([10.0, 10.1]))
    assert first.outcome == Outcome.INCONCLUSIVE  # one block: only a gross effect can fail


def test_base_and_head_are_shown_over_the_rounds_of_the_deciding_look():
    """A check decided at round 4 keeps its delta and interval from that look; the base and
    head beside them come from the same rounds, not from every round measured after it."""
    base = rounds([10.0, 10.1, 10.0, 10.0, 10.0, 10.0])
    head = rounds([10.05, 10.0, 10.0, 10.05, 10.6, 10.6])
    v = ab(head, base)
    tpot = check(v, "sweep.c8.tpot_p50_ms")
    assert tpot.outcome == Outcome.PASS and tpot.decided_at_round == 4 and v.rounds == 6
    assert tpot.head_n == tpot.base_n == 4
    assert tpot.head / tpot.base == pytest.approx(1 + tpot.delta_pct / 100, rel=1e-9)
    gross = check(ab(rounds([20.0, 20.0, 10.0, 10.0]), rounds([10.0, 10.1, 9.9, 10.0])),
                  "sweep.c8.tpot_p50_ms")  # failed on the first block: shown from it
    assert (gross.head, gross.base, gross.head_n) == (pytest.approx(20.0), pytest.approx(
        math.sqrt(10.0 * 10.1)), 2)


def test_a_quarter_slower_fails_only_at_a_block_end():
    base, head = rounds([10.0, 10.0, 10.0, 10.0]), rounds([12.5, 12.6, 12.4, 12.5])
    v = ab(head, base)
    tpot = check(v, "sweep.c8.tpot_p50_ms")
    assert tpot.outcome == Outcome.FAIL and tpot.decided_at_round in (2, 4)


def test_results_not_measured_sequentially_are_one_block():
    base, head = rounds([10.0, 10.1, 9.9], None), rounds([12.0, 12.2, 11.8], None)
    tpot = check(ab(head, base), "sweep.c8.tpot_p50_ms")  # one look at all three rounds: +20%
    assert tpot.outcome == Outcome.FAIL and tpot.decided_at_round == 3
    assert tpot.delta_pct == pytest.approx(20.0, abs=0.5) and tpot.head_n == 3
    assert "1 block(s) of 3" in tpot.interval_source


def test_rounds_noisier_than_the_calibration_scale_it_up_and_are_not_blamed_on_the_runner():
    """This run's rounds spread far more than its calibration's: the calibration's spread is
    scaled up by as much (the test is never bolder than this run's rounds allow), and the note
    says so without telling anyone to recalibrate."""
    base = rounds([10.0, 10.05, 10.0, 9.95])
    head = rounds([10.0, 13.0, 7.6, 10.1])
    tpot = check(ab(head, base), "sweep.c8.tpot_p50_ms")
    assert tpot.outcome == Outcome.INCONCLUSIVE
    assert "scaled up" in tpot.note and "calibrate" not in tpot.note


def test_without_a_calibration_a_round_shows_no_interval():
    """One round and no calibration: no spread yet, so no interval; it is kept as none and
    said in words, never printed as -100% .. +inf%."""
    v = ab(rounds([13.0]), rounds([7.6]), noise=Noise())
    tpot = check(v, "sweep.c8.tpot_p50_ms")
    assert tpot.outcome == Outcome.INCONCLUSIVE
    assert tpot.ci_low_pct is None and tpot.ci_high_pct is None
    assert "inf" not in v.headline and "-100.0%" not in v.headline
    assert v.headline.startswith("INCONCLUSIVE: ") and "no interval yet" in v.headline
    assert "Infinity" not in v.model_dump_json() and "inf" not in render_verdict(v)


def test_no_calibration_is_named_and_decides_only_on_the_runs_own_spread():
    v = ab(rounds([14.0]), rounds([10.0]), noise=Noise(description="no calibration found"))
    tpot = check(v, "sweep.c8.tpot_p50_ms")
    assert tpot.outcome == Outcome.INCONCLUSIVE
    assert "no calibration: the run's own spread only" in tpot.interval_source
    assert any("no calibration found" in n for n in v.notes)


def test_the_replay_is_a_pure_function_of_the_files():
    base, head = rounds([10.0, 10.2, 9.9, 10.1]), rounds([10.3, 10.6, 10.2, 10.5])
    assert ab(head, base).model_dump() == ab(head, base).model_dump()
    # the mean paired d of the rounds up to the deciding look, not the ratio of the means
    tpot = check(ab(head, base), "sweep.c8.tpot_p50_ms")
    n = tpot.decided_at_round or 4
    d = [math.log(h / b) for h, b in zip([10.3, 10.6, 10.2, 10.5][:n],
                                          [10.0, 10.2, 9.9, 10.1][:n], strict=True)]
    assert tpot.delta_pct == pytest.approx(math.expm1(sum(d) / n) * 100)


def test_an_oversubscribed_runner_is_an_error_with_the_fix_not_a_fail():
    finding = Finding(id="server.torch_pool_oversubscribed", severity=Severity.invalidating,
                      title="VLLM::EngineCore runs 8 torch threads on 2 CPUs", detail="",
                      fix="set OMP_NUM_THREADS=2 in the server's environment")
    head = rounds([20.0]).model_copy(update={"doctor": DoctorReport(findings=[finding])})
    v = ab(head, rounds([10.0]))
    assert v.outcome == Outcome.ERROR
    assert any("set OMP_NUM_THREADS=2" in e and e.startswith("head runner:") for e in v.errors)


def test_doctor_warnings_reach_the_verdict():
    finding = Finding(id="cpu.governor", severity=Severity.warning, title="governor powersave",
                      detail="", fix="set the performance governor")
    head = rounds([10.0]).model_copy(update={"doctor": DoctorReport(findings=[finding]),
                                             "fingerprint": fingerprint("NVIDIA A100-SXM4-80GB")})
    v = ab(head, rounds([10.0]))
    assert "head runner: governor powersave; fix: set the performance governor" in v.warnings


def test_a_spread_checks_interval_is_shown_only_when_it_says_something():
    """With one block, the F interval of the head's spread over the base's spans a factor of
    hundreds ([-96%, +20,000%] in a real first-block fail): shown as none, never printed. With
    many rounds it narrows and is shown."""
    jitter = [10.0, 10.3, 9.8, 10.2, 9.9, 10.1, 10.25, 9.85] * 4
    few = ab(rounds([20.0, 23.0]), rounds([10.0, 10.1]))
    spread = check(few, "spread.sweep.c8.tpot_p50_ms")
    assert spread.delta_pct is not None
    assert spread.ci_low_pct is None and spread.ci_high_pct is None
    many = ab(rounds(jitter[::-1], sequential=None), rounds(jitter, sequential=None))
    spread = check(many, "spread.sweep.c8.tpot_p50_ms")
    assert spread.ci_low_pct is not None and spread.ci_high_pct is not None
    assert (1 + spread.ci_high_pct / 100) / (1 + spread.ci_low_pct / 100) <= 4.0


STEADY = [10.0, 10.1] * 4
JITTERY = [10.0, 10.18] * 4  # rounds spread about 1.8x STEADY's


def test_a_spread_past_its_threshold_but_not_shown_past_it_says_so():
    """Four blocks: the head's rounds spread about 1.8x the base's, past the 1.5x threshold as
    measured, but 4 degrees of freedom a side cannot tell that from noise: the row passes and
    says it was not shown past, where a head as steady as its base has no such note."""
    spread = check(ab(rounds(JITTERY), rounds(STEADY)), "spread.sweep.c8.tpot_p50_ms")
    assert spread.outcome == Outcome.PASS
    assert spread.delta_pct is not None and spread.delta_pct > 50.0
    assert "not shown past it" in spread.note
    steady = check(ab(rounds(STEADY), rounds(STEADY)), "spread.sweep.c8.tpot_p50_ms")
    assert steady.outcome == Outcome.PASS and steady.note == ""


def test_the_terminal_table_points_a_noted_row_to_its_note():
    """`gate compare`/`gate ab` print the table: a spread row past its threshold but not shown
    past it carries a footnote mark, and its note is printed under the table."""
    text = render_verdict(ab(rounds(JITTERY), rounds(STEADY)))
    row = next(line for line in text.splitlines()
               if line.startswith("round-to-round spread of TPOT p50"))
    mark = row.split()[-1]
    assert mark.startswith("[") and row.split()[-2] == "pass"
    assert f"{mark} round-to-round spread of TPOT p50" in text.split("check notes:")[1]
    assert "not shown past it" in text.split("check notes:")[1]
