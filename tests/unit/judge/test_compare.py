"""gate compare: checks, decision rule, errors, merging, threshold overrides, CLI exit codes."""

from __future__ import annotations

import json

import pytest
from support.calibrations import noise_for_results, store_for
from support.cli import gate_in_process
from support.factories import (
    cell,
    drain_results,
    gpu_plan,
    make_results,
    ratio_results,
    results_folder,
)
from support.paths import REPO_ROOT

from gate.cli import main as gate_cli_main
from gate.cli.common import assignments
from gate.core.errors import GateError
from gate.judge.baseline import Provenance, build_baseline, load_baseline
from gate.judge.checks import results_figures
from gate.judge.compare import (
    ABReference,
    BaselineReference,
    Cause,
    NoReference,
    advice,
    compare_results,
)
from gate.judge.noise import Noise
from gate.judge.verdict import Outcome, Verdict, load_verdict
from gate.measure.results import save_results
from gate.plan.thresholds import Thresholds

T = Thresholds()
BASELINES = REPO_ROOT / "baselines"
NAMES = [f"{kind}.c{c}.{m}" for c in (1, 8, 32) for kind, m in
         (("sweep", "tpot_p50_ms"), ("sweep", "tpot_p99_ms"), ("sweep", "itl_p99_ms"),
          ("ratio", "tpot_p50"))] + ["drain.req_per_min"]
# A calibrated GPU runner: 1% between server pairs, 2% between rounds.
NOISE = noise_for_results(drain_results([233.0]), names=NAMES, between=0.01, within=0.02)


def ab(head, base, thresholds=T, noise=NOISE):
    return compare_results(head, ABReference(base), thresholds, noise=noise)


def alone(head, thresholds=T):
    return compare_results(head, NoReference(), thresholds)


def check(verdict: Verdict, name: str):
    return next(c for c in verdict.checks if c.name == name)


# ---------------------------------------------------------------- seed numbers


def test_seed_regression_233_to_121_fails_naming_drain_rate():
    v = ab(drain_results([121.0]), drain_results([233.0]))
    assert v.outcome == Outcome.FAIL and v.exit_code == 1
    c = check(v, "drain.req_per_min")
    assert c.outcome == Outcome.FAIL
    assert c.delta_pct == pytest.approx(-48.1, abs=0.1)
    assert c.ci_high_pct < -10
    assert "drain req/min" in v.headline and "-48" in v.headline


def test_seed_partial_revert_233_to_224_passes_at_10pct():
    v = ab(drain_results([224.0]), drain_results([233.0]))
    assert v.outcome == Outcome.PASS, v.headline
    c = check(v, "drain.req_per_min")
    assert c.delta_pct == pytest.approx(-3.9, abs=0.1)
    assert c.ci_low_pct < c.delta_pct < c.ci_high_pct < 10


def test_seed_b300_guided_free_ratio_fails_from_c8():
    v = alone(ratio_results(7490.0, 1120.0), T)
    assert v.mode == "absolute"
    assert v.outcome == Outcome.FAIL
    assert {c.name for c in v.checks if c.kind == "absolute"} == {"bound.c8.tpot_p50", "bound.c32.tpot_p50"}
    c8 = check(v, "bound.c8.tpot_p50")
    assert c8.head == pytest.approx(7.49 / 1.12) and c8.outcome == Outcome.FAIL


def test_one_repeats_bound_interval_has_the_priors_width_not_zero():
    # One run cannot know its ratio to the fourth digit: the interval comes from the prior's
    # spread (a stored base of zero spread must not pool it away).
    c8 = check(alone(ratio_results(1070.0, 1110.0), T), "bound.c8.tpot_p50")
    assert c8.head_n == 1
    assert c8.ci_low < 0.99 * c8.head and c8.ci_high > 1.01 * c8.head


def test_seed_b300_healthy_ratio_passes():
    v = alone(ratio_results(1070.0, 1110.0), T)
    assert v.outcome == Outcome.PASS, v.headline
    assert check(v, "bound.c8.tpot_p50").head == pytest.approx(1.07 / 1.11)


def test_ratio_skipped_with_note_without_free_arm():
    cells = [cell("sweep", "guided", level, tpot_p50=50.0) for level in (1, 8)]
    v = alone(make_results(cells, plan=gpu_plan(levels=(1, 8))), T)
    assert v.outcome == Outcome.PASS
    assert not [c for c in v.checks if c.kind == "absolute"]


def test_ratio_disabled_by_null_threshold():
    t = T.with_overrides(assignments(["guided_free_tpot_ratio=null"], "--threshold"))
    v = alone(ratio_results(7490.0, 1120.0), t)
    assert v.outcome == Outcome.PASS
    assert any("disabled" in n for n in v.notes)


# ---------------------------------------------------------------- paired rounds


def test_noisy_repeats_are_inconclusive_with_resume_advice():
    head = drain_results([180.0, 230.0, 205.0])  # -12% on average, wide spread
    base = drain_results([240.0, 225.0, 233.0])
    v = ab(head, base)
    assert v.outcome == Outcome.INCONCLUSIVE and v.exit_code == 3
    assert "is not decided" in v.headline
    assert any("gate ab --resume" in a for a in v.advice)


def test_without_a_calibration_an_ab_rests_on_its_own_spread():
    """No made-up prior: one round of a 23% drop decides nothing without a calibration (no
    spread is known), and the verdict says a calibration would decide sooner; a halved
    throughput fails anyway, on the first block's look for gross effects."""
    v = ab(drain_results([180.0]), drain_results([233.0]), noise=Noise())
    drain = check(v, "drain.req_per_min")
    assert drain.outcome == Outcome.INCONCLUSIVE and drain.ci_low_pct is None  # unbounded
    assert "no calibration" in drain.interval_source
    assert any("a calibration of this runner" in n for n in v.notes)
    assert any("gate calibrate" in a for a in v.advice)
    halved = check(ab(drain_results([116.0]), drain_results([233.0]), noise=Noise()),
                   "drain.req_per_min")
    assert halved.outcome == Outcome.FAIL and halved.interval_is_range
    assert halved.interval_source.startswith("screening: the range of the first block")


def test_sweep_tpot_regression_fails_per_level():
    def run(factor: float, repeats=(0, 1, 2)):
        cells = []
        for r in repeats:
            for level in (1, 8):
                g = 20.0 * (factor if level == 8 else 1.0) * (1 + 0.01 * r)
                cells += [cell("sweep", "guided", level, r, tpot_p50=g), cell("sweep", "free", level, r, tpot_p50=20.0)]
        return make_results(cells, plan=gpu_plan(levels=(1, 8), repeats=3))

    v = ab(run(1.5), run(1.0))
    assert check(v, "sweep.c8.tpot_p50_ms").outcome == Outcome.FAIL
    assert check(v, "sweep.c1.tpot_p50_ms").outcome == Outcome.PASS
    # two gate run outputs: one block of all three rounds, judged at one look
    c8 = check(v, "sweep.c8.tpot_p50_ms")
    assert c8.head_n == c8.decided_at_round == 3
    assert check(v, "sweep.c1.tpot_p50_ms").head_n == 3
    assert v.outcome == Outcome.FAIL


def test_one_round_is_judged_with_the_calibration_and_pairs_the_overhead():
    def run(guided_ms: float):
        cells = [cell("sweep", "guided", 8, tpot_p50=guided_ms), cell("sweep", "free", 8, tpot_p50=20.0)]
        return make_results(cells, plan=gpu_plan(levels=(8,)))

    v = ab(run(28.0), run(20.0))  # +40%: past the thresholds (10%, 20%), short of gross
    tpot = check(v, "sweep.c8.tpot_p50_ms")
    assert tpot.outcome == Outcome.FAIL and tpot.delta_pct == pytest.approx(40.0)
    assert "1 paired round(s), 1 block(s) of 1; t +" in tpot.interval_source
    assert "calibration: 10 blocks" in tpot.interval_source
    overhead = check(v, "ratio.c8.tpot_p50")  # head's guided/free against base's, same round
    assert overhead.outcome == Outcome.FAIL and overhead.delta_pct == pytest.approx(40.0)
    assert not [c for c in v.checks if c.kind == "absolute"]  # no absolute bound in A/B
    assert ab(run(28.0), run(20.0)).model_dump() == v.model_dump()


def test_drain_output_rate_is_the_same_measurement_judged_once():
    v = ab(drain_results([121.0]), drain_results([233.0]))
    assert [c.name for c in v.checks if c.kind == "relative"] == ["drain.req_per_min"]


def test_advice_follows_typed_causes_not_message_text():
    assert any("schema" in a for a in advice(Outcome.ERROR, {Cause.OFF_SCHEMA}, True))
    assert not any("schema" in a for a in advice(Outcome.ERROR, {Cause.INCOMPLETE}, True))
    # the cause comes from the validity check's outcome, on either side
    v = ab(drain_results([233.0]), _guided_drain(invalid=2))
    assert any("schema" in a for a in v.advice)
    v = ab(drain_results([233.0]), _guided_drain(failed=2))
    assert v.outcome == Outcome.ERROR and not any("schema" in a for a in v.advice)


# ---------------------------------------------------------------- broken measurements


def _guided_drain(**kw):
    return make_results([cell("drain", "guided", 64, **kw)])


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"invalid": 3}, "not valid JSON"),
        ({"length": 2}, "finish_reason=length"),
        ({"failed": 4}, "4 request(s) failed"),
        ({"completed": 0, "requests": 10}, "completed no requests"),
    ],
)
def test_broken_measurement_is_error(kw, words):
    v = ab(_guided_drain(**kw), drain_results([233.0]))
    assert v.outcome == Outcome.ERROR and v.exit_code == 4
    assert any(words in e for e in v.errors), v.errors
    assert v.headline.startswith("ERROR")


def test_validity_error_even_without_base_and_when_faster():
    v = alone(_guided_drain(invalid=1, rpm=400.0), T)
    assert v.outcome == Outcome.ERROR
    assert check(v, "validity.guided_valid_share").outcome == Outcome.ERROR


def test_incomplete_or_errored_run_is_error():
    cells = [cell("drain", "guided", 64)]
    v = alone(make_results(cells, status="error"), T)
    assert v.outcome == Outcome.ERROR and "'error', not complete" in v.errors[0]
    v = alone(make_results(cells, errors=["server died"]), T)
    assert v.outcome == Outcome.ERROR and "server died" in v.errors[0]


def test_broken_base_is_error_too():
    v = ab(drain_results([233.0]), _guided_drain(failed=1))
    assert v.outcome == Outcome.ERROR and any(e.startswith("base") for e in v.errors)


def test_ab_plan_mismatch_names_difference():
    head = drain_results([233.0])
    base = drain_results([233.0], plan=gpu_plan(max_num_seqs=32))
    v = ab(head, base)
    assert v.outcome == Outcome.ERROR
    assert any("plan_hash" in e and "max_num_seqs: 32 -> 64" in e for e in v.errors), v.errors
    assert not [c for c in v.checks if c.kind == "relative"]


def test_ab_hardware_mismatch_names_difference():
    v = ab(drain_results([233.0]), drain_results([233.0], gpu="NVIDIA H100 80GB HBM3"))
    assert v.outcome == Outcome.ERROR
    assert any("hardware" in e and "H100" in e and "A100" in e for e in v.errors)


def test_explicit_baseline_mismatch_is_error_naming_difference():
    baseline = load_baseline("baselines/a100-gemma4-26b--a100-80gb--gemma-4-26b-a4b-it.yaml")
    v = compare_results(drain_results([233.0], gpu="NVIDIA B300"), BaselineReference(baseline), T)
    assert v.outcome == Outcome.ERROR
    assert any("hardware" in e and "B300" in e for e in v.errors)


# ---------------------------------------------------------------- confirm / merge


# ---------------------------------------------------------------- thresholds, verdict file


def test_threshold_overrides_refuse_unknown_names_and_bad_values():
    t = T.with_overrides(assignments(["drain_throughput_pct=15", "ratio_min_concurrency=4"], "--threshold"))
    assert t.drain_throughput_pct == 15.0 and t.ratio_min_concurrency == 4
    with pytest.raises(GateError, match="unknown threshold 'tpot_p95_pct'"):
        T.with_overrides(assignments(["tpot_p95_pct=10"], "--threshold"))
    with pytest.raises(GateError, match="drain_throughput_pct"):
        T.with_overrides(assignments(["drain_throughput_pct=fast"], "--threshold"))
    with pytest.raises(GateError, match="validity_min"):
        T.with_overrides(assignments(["validity_min=2"], "--threshold"))
    with pytest.raises(GateError, match="NAME=VALUE"):
        T.with_overrides(assignments(["tpot_p50_pct"], "--threshold"))


def test_threshold_override_changes_outcome():
    head, base = drain_results([205.0]), drain_results([233.0])  # -12%
    assert ab(head, base).outcome != Outcome.PASS
    t = T.with_overrides(assignments(["drain_throughput_pct=25"], "--threshold"))
    assert ab(head, base, t).outcome == Outcome.PASS


def test_verdict_json_round_trip(tmp_path):
    v = ab(drain_results([121.0]), drain_results([233.0]))
    path = tmp_path / "verdict.json"
    path.write_text(v.model_dump_json(indent=1))
    again = load_verdict(path)
    assert again == v
    assert json.loads(path.read_text())["outcome"] == "fail"
    assert "sequential one-sided t test" in again.method and "blocks of 1" in again.method


# ---------------------------------------------------------------- CLI


@pytest.fixture
def gate_main(tmp_path, monkeypatch):
    monkeypatch.setenv("GATE_CACHE_DIR", str(tmp_path / "cache"))  # no user calibrations
    return gate_cli_main


def _save(results, folder):
    folder.mkdir(parents=True, exist_ok=True)
    save_results(results, folder / "results.json")
    return folder


@pytest.mark.parametrize(
    ("head", "code"),
    [([121.0], 1), ([224.0], 0), ([180.0, 230.0, 205.0], 3)],
)
def test_cli_exit_codes_ab(gate_main, tmp_path, capsys, head, code):
    h = _save(drain_results(head), tmp_path / "head")
    b = _save(drain_results([240.0, 225.0, 233.0] if len(head) > 1 else [233.0]), tmp_path / "base")
    store_for(tmp_path / "noise", drain_results([233.0]), names=NAMES, between=0.01, within=0.02)
    args = ["compare", str(h), "--against", str(b / "results.json"), "--noise-dir",
            str(tmp_path / "noise")]
    assert gate_main(args) == code
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(("PASS", "FAIL", "INCONCLUSIVE"))
    assert "interval" in out and "threshold" in out
    verdict = load_verdict(h / "verdict.json")
    assert verdict.exit_code == code and verdict.mode == "ab"
    assert str(tmp_path / "noise") in verdict.noise_profile


def test_cli_reads_the_runners_own_calibrations_from_the_cache(gate_main, tmp_path, capsys):
    h = _save(drain_results([180.0]), tmp_path / "head")
    b = _save(drain_results([233.0]), tmp_path / "base")
    args = ["compare", str(h), "--against", str(b), "--noise-dir", str(tmp_path / "none")]
    assert gate_main(args) == 3  # no calibration: nothing known about the spread
    store_for(tmp_path / "cache" / "noise", drain_results([233.0]), names=NAMES)
    assert gate_main(args) == 1
    assert "cache" in load_verdict(h / "verdict.json").noise_profile


def test_compare_command_exits_4_on_failed_requests_and_2_on_bad_input(tmp_path):
    h = results_folder(tmp_path / "head", _guided_drain(failed=2))
    assert gate_in_process("compare", h).returncode == 4
    ok = results_folder(tmp_path / "ok", drain_results([233.0]))
    proc = gate_in_process("compare", ok, "--threshold", "nope=1")
    assert proc.returncode == 2 and "unknown threshold" in proc.stderr
    assert gate_in_process("compare", tmp_path / "missing.json").returncode == 2


def test_compare_command_finds_the_baseline_of_its_hardware_or_says_why_not(tmp_path):
    h = results_folder(tmp_path / "head", drain_results([121.0]))
    out = tmp_path / "v" / "verdict.json"
    proc = gate_in_process("compare", h, "--baseline", "auto", "--baselines-dir", BASELINES,
                           "--out", out)
    assert proc.returncode == 0  # the shipped seed baseline is reported: shown, not judged
    verdict = load_verdict(out)
    assert verdict.mode == "baseline" and verdict.baseline.endswith(".yaml")
    (drain,) = [r for r in verdict.reported if r.name == "drain.req_per_min"]
    assert drain.delta_pct == pytest.approx(-48.1, abs=0.1)
    other = results_folder(tmp_path / "l4", drain_results([121.0], gpu="NVIDIA L4"))
    proc = gate_in_process("compare", other, "--baseline", "auto", "--baselines-dir", BASELINES)
    assert proc.returncode == 2
    assert "hardware" in proc.stderr and "NVIDIA L4" in proc.stderr and "--against" in proc.stderr


def test_a_baseline_of_another_gate_is_said_and_one_of_this_gate_is_not():
    base = drain_results([233.0, 231.0, 235.0])
    figures, units = results_figures(base)
    head = drain_results([232.0, 234.0, 230.0])
    for made_by, said in ((head.gate_version, False), ("0.0.9+gabc", True)):
        baseline = build_baseline(base, figures, Provenance(kind="measured",
                                                            gate_version=made_by), units)
        v = compare_results(head, BaselineReference(baseline), T)
        notes = [n for n in v.notes if "measured by gate" in n]
        assert bool(notes) is said, v.notes
        if said:
            assert notes == [f"the baseline was measured by gate 0.0.9+gabc, this run by gate "
                             f"{head.gate_version}"]
