"""gate.judge.run_validity: what makes a run unjudgeable (an `error` verdict, never a pass):
its status, failed requests, guided outputs off their schema, results that are not
comparable, and runner findings that invalidate the measurement."""

from __future__ import annotations

from support import factories as f

from gate.judge.run_validity import (
    ab_errors,
    drift_warnings,
    integrity_errors,
    machine_warnings,
    plan_differences,
    runner_findings,
    validity_checks,
)
from gate.judge.verdict import Outcome
from gate.measure.results import MachineSample, RequestRecord
from gate.plan.thresholds import Thresholds
from gate.runner.doctor import DoctorReport, Finding, Severity

T = Thresholds()


def record(phase: str, error: str) -> RequestRecord:
    return RequestRecord(index=0, phase=phase, arm="guided", concurrency=64, send_s=0.0,
                         error=error)


def checks_by_name(results, thresholds=T):
    checks, errors = validity_checks(results, thresholds)
    return {c.name: c for c in checks}, errors


# -- integrity: can the run be judged at all ---------------------------------------------------
def test_a_complete_run_without_failures_has_no_integrity_errors():
    assert integrity_errors(f.sweep_results(), "head") == []


def test_status_and_the_runs_own_errors_are_named_with_the_side():
    results = f.make_results([f.cell("drain", "guided", 64)], status="error",
                             errors=["server died"])
    assert integrity_errors(results, "base") == ["base run error: server died"]
    silent = f.make_results([f.cell("drain", "guided", 64)], status="error", errors=[])
    assert integrity_errors(silent, "head") == ["head run status is 'error', not complete"]


def test_failed_requests_are_counted_per_cell_with_the_first_measured_error():
    cells = [f.cell("drain", "guided", 64, failed=2), f.cell("sweep", "free", 8, failed=1)]
    records = [record("warmup", "warm-up hiccup"), record("drain", "HTTP 500: " + "x" * 500)]
    (error,) = integrity_errors(f.make_results(cells, records=records), "head")
    assert error.startswith("head: 3 request(s) failed (drain guided c=64 r1: 2, "
                            "sweep free c=8 r1: 1); first error: HTTP 500: xxx")
    assert "warm-up" not in error and len(error.split("first error: ")[1]) == 200


def test_results_without_measured_cells_or_with_an_empty_cell_are_errors():
    assert integrity_errors(f.make_results([]), "head") == ["head results hold no measured cells"]
    empty = f.make_results([f.cell("sweep", "guided", 8, completed=0)])
    assert "head: cell sweep guided c=8 r1 completed no requests" in integrity_errors(empty, "head")


# -- validity: did the guided outputs follow their schema ---------------------------------------
def test_all_valid_guided_outputs_pass_every_validity_check():
    checks, errors = checks_by_name(f.sweep_results())
    assert errors == []
    assert {c.outcome for c in checks.values()} == {Outcome.PASS}
    share = checks["validity.guided_valid_share"]
    assert share.head == 1.0 and share.note == "128/128 valid"  # 4 guided cells of 32


def test_one_invalid_output_is_an_error_that_says_why():
    results = f.make_results([f.cell("drain", "guided", 64, invalid=1)])
    checks, (error,) = checks_by_name(results)
    assert checks["validity.guided_valid_share"].outcome is Outcome.ERROR
    assert error.startswith("head: 1 of 100 guided outputs are not valid JSON for their schema")
    assert "(99.0% valid, 100% required)" in error


def test_a_lower_validity_threshold_lets_a_few_invalid_outputs_pass():
    results = f.make_results([f.cell("drain", "guided", 64, invalid=1)])
    checks, errors = checks_by_name(results, Thresholds(validity_min=0.95))
    assert errors == [] and checks["validity.guided_valid_share"].outcome is Outcome.PASS


def test_outputs_nobody_validated_are_an_error_not_a_pass():
    cell = f.cell("drain", "guided", 64).model_copy(update={"valid_outputs": 60})
    checks, errors = checks_by_name(f.make_results([cell]))
    assert "head: only 60 of 100 guided outputs were validated against their schema" in errors
    assert checks["validity.guided_valid_share"].outcome is Outcome.ERROR


def test_length_finishes_beyond_the_allowance_are_an_error():
    results = f.make_results([f.cell("drain", "guided", 64, length=2)])
    checks, errors = checks_by_name(results)
    assert checks["validity.guided_length_finishes"].outcome is Outcome.ERROR
    assert any("2 guided request(s) ended with finish_reason=length (allowed 0)" in e
               for e in errors)
    checks, errors = checks_by_name(results, Thresholds(max_length_finishes=2))
    assert errors == [] and checks["validity.guided_length_finishes"].outcome is Outcome.PASS


def test_failed_requests_are_a_check_of_their_own():
    results = f.make_results([f.cell("drain", "guided", 64, failed=3)])
    checks, _ = checks_by_name(results)
    failed = checks["requests.failed"]
    assert failed.head == 3.0 and failed.outcome is Outcome.ERROR


def test_a_run_without_guided_completions_has_no_validity_checks():
    assert validity_checks(f.make_results([f.cell("sweep", "free", 8)]), T) == ([], [])


# -- A/B: are the two sides comparable --------------------------------------------------------
def test_the_same_plan_on_the_same_hardware_is_comparable():
    assert ab_errors(f.drain_results([121.0]), f.drain_results([233.0])) == []


def test_a_different_plan_names_the_keys_that_differ():
    head = f.drain_results([121.0], plan=f.gpu_plan(max_num_seqs=8))
    (error,) = ab_errors(head, f.drain_results([233.0]))
    assert error.startswith("plan_hash differs: base ")
    assert "server.max_num_seqs: 64 -> 8" in error


def test_different_hardware_names_both_sides():
    head = f.drain_results([121.0], gpu="NVIDIA L4")
    assert ab_errors(head, f.drain_results([233.0])) == [
        "hardware differs: base '1x NVIDIA A100-SXM4-80GB', head '1x NVIDIA L4'"]


def test_plan_differences_skip_what_does_not_change_the_measurement():
    base = {"name": "a", "repeats": 1, "thresholds": {"x": 1}, "server": {"port": 1, "seqs": 64}}
    head = {"name": "b", "repeats": 5, "thresholds": {"x": 2}, "server": {"port": 1, "seqs": 8}}
    assert plan_differences(base, head) == ["server.seqs: 64 -> 8"]


def test_plan_differences_stop_at_the_limit():
    base = {f"k{i}": i for i in range(10)}
    head = {f"k{i}": -i for i in range(10)}
    assert len(plan_differences(base, head, limit=3)) == 3


# -- the runner doctor's findings --------------------------------------------------------------
def test_runner_findings_split_into_errors_with_the_fix_and_warnings():
    results = f.sweep_results()
    assert runner_findings(results, "head") == ([], [])
    results.doctor = DoctorReport(findings=[
        Finding(id="server.torch_pool_oversubscribed", severity=Severity.invalidating,
                title="torch uses 172 threads on 12 CPUs", fix="set OMP_NUM_THREADS=12"),
        Finding(id="cpu.governor", severity=Severity.warning, title="governor is powersave"),
        Finding(id="disk.free", severity=Severity.info, title="disk has room"),
    ])
    errors, warnings = runner_findings(results, "head")
    assert errors == ["head runner: torch uses 172 threads on 12 CPUs; fix: set OMP_NUM_THREADS=12"]
    assert warnings == ["head runner: governor is powersave"]


# ---- what the runner did during the run ---------------------------------------------------------


def _sampled(cells, steal=None, mhz=None):
    return [c.model_copy(update={"machine": MachineSample(
        steal_pct=None if steal is None else steal[i], cpu_mhz=None if mhz is None else mhz[i])})
        for i, c in enumerate(cells)]


def test_steal_time_and_a_moving_clock_are_warned_about():
    cells = [f.cell("sweep", "guided", 8, r) for r in range(4)]
    calm = f.make_results(_sampled(cells, steal=[0.5, 0.8, 0.2, 1.0], mhz=[2500.0] * 4))
    assert machine_warnings([calm]) == []
    stolen = f.make_results(_sampled(cells, steal=[0.5, 0.8, 14.0, 1.0]))
    (w,) = machine_warnings([stolen])
    assert "hypervisor took 4.1%" in w and "14% in sweep guided c=8 r3" in w
    clocked = f.make_results(_sampled(cells, mhz=[2500.0, 2100.0, 2500.0, 2450.0]))
    (w,) = machine_warnings([clocked])
    assert "from 2100 to 2500 MHz" in w
    assert machine_warnings([f.make_results(cells)]) == []  # nothing read: nothing said


def test_a_base_that_drifts_from_its_first_block_to_its_last_is_warned_about():
    plan = f.gpu_plan(levels=(8,), repeats=6)
    steady = [f.cell("sweep", "guided", 8, r, tpot_p50=20.0 + 0.1 * r) for r in range(6)]
    assert drift_warnings(f.make_results(steady, plan=plan), 2) == []
    drifting = [f.cell("sweep", "guided", 8, r, tpot_p50=20.0 * (1 + 0.1 * (r // 2)))
                for r in range(6)]
    (w,) = drift_warnings(f.make_results(drifting, plan=plan), 2)
    assert w.startswith("base: TPOT p50 at c=8 moved by +20% from its first block to its last")
    drain = [f.cell("drain", "guided", 64, r, output_tps=300.0 * (0.8 if r > 3 else 1.0))
             for r in range(6)]
    (w,) = drift_warnings(f.make_results(drain, plan=plan), 2)
    assert "drain output tok/s moved by -20%" in w
