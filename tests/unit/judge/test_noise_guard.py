"""What a calibration run may claim (gate.judge.noise_guard; security review M3): a real date
not after today, newest first by that date, and a merge that takes fresh runs only and cannot
move a check's spread further than chance does."""

from __future__ import annotations

import datetime as dt

import pytest
import yaml
from support.calibrations import calibration_run

from gate.core.errors import GateError
from gate.core.store import write_record
from gate.judge import noise
from gate.judge.noise_guard import (
    newest_first,
    run_day,
    shift_problems,
    stale_run_problems,
    utc_today,
)

TODAY = dt.date(2026, 12, 3)
KEY = noise.CalibrationKey(plan="cpu-smoke", plan_hash="abc123", runner_key="cpu: Test*")


@pytest.mark.parametrize("text", ["9999-12-31", "2026-12-04"])
def test_a_run_dated_after_today_is_refused(text):
    with pytest.raises(ValueError, match="after today .2026-12-03, UTC.: a calibration run cannot"):
        run_day(text, TODAY)


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", "2026-1-5", "20261203", ""])
def test_a_date_that_is_not_one_is_refused(text):
    with pytest.raises(ValueError, match="is not a date .YYYY-MM-DD."):
        run_day(text, TODAY)


def test_a_file_dated_in_the_future_does_not_load(tmp_path):
    """The attack: one run dated 9999-... sorts first forever and sets the noise alone."""
    path = noise.store_run(tmp_path, KEY, calibration_run(date="2026-11-30"))
    data = yaml.safe_load(path.read_text())
    data["runs"][0]["provenance"]["date"] = "9999-12-31"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(GateError) as err:
        noise.load_calibration(path)
    assert "runs.0.provenance.date" in str(err.value) and "after today" in str(err.value)
    with pytest.raises(GateError):  # nor does gate ab or gate compare find it
        noise.find_calibrations([tmp_path], KEY)


def test_runs_pool_newest_first_by_their_date():
    runs = [calibration_run(date=d) for d in ("2026-11-02", "2026-11-30", "2026-10-15")]
    assert [r.provenance.date for r in newest_first(runs)] == [
        "2026-11-30", "2026-11-02", "2026-10-15"]
    pooled = noise.Noise((noise.NoiseCalibration(**KEY.model_dump(), runs=runs),), "t")
    assert pooled.runs()[0].provenance.date == "2026-11-30"


def test_a_stored_file_keeps_its_newest_runs_when_it_is_full(tmp_path):
    def run(day: str) -> noise.CalibrationRun:
        return calibration_run(names=("drain.req_per_min",), blocks=2, date=day)
    full = [run(f"2026-11-{day:02d}") for day in range(noise.MAX_RUNS, 0, -1)]
    write_record(tmp_path / "cal.yaml",
                       noise.NoiseCalibration(**KEY.model_dump(), runs=full))
    path = noise.store_run(tmp_path, KEY, run("2026-10-01"))  # an older one comes in
    dates = [r.provenance.date for r in noise.load_calibration(path).runs]
    assert dates[0] == f"2026-11-{noise.MAX_RUNS:02d}" and "2026-10-01" not in dates


def test_a_merge_takes_runs_of_today_and_yesterday_only():
    runs = [calibration_run(date=d) for d in ("2026-12-03", "2026-12-02", "2026-12-01")]
    (problem,) = stale_run_problems(runs, TODAY)
    assert "dated 2026-12-01 is older than 2026-12-02" in problem
    assert stale_run_problems(runs[:2], TODAY) == []
    assert utc_today() == dt.datetime.now(dt.UTC).date()


def test_a_run_whose_spread_moves_more_than_chance_is_named():
    stored = [calibration_run(between=0.01, within=0.02, blocks=10, date="2026-11-20")]
    healthy = calibration_run(between=0.012, within=0.022, blocks=4, date="2026-12-03")
    assert shift_problems(stored, healthy) == []
    wide = calibration_run(between=0.08, within=0.02, blocks=10, date="2026-12-03")
    problems = shift_problems(stored, wide)
    assert problems and all("more than chance moves it (F test, p < 0.001)" in p
                            for p in problems)
    assert any(p.startswith("drain.req_per_min: the run's block means spread") for p in problems)
    narrow = calibration_run(between=0.0005, within=0.001, blocks=10, date="2026-12-03")
    assert shift_problems(stored, narrow)  # a run that claims almost no noise is named too


def test_nothing_stored_of_the_same_design_bounds_nothing():
    stored = [calibration_run(rounds_per_block=3, date="2026-11-20")]
    wide = calibration_run(between=0.08, rounds_per_block=2, date="2026-12-03")
    assert shift_problems([], wide) == [] and shift_problems(stored, wide) == []
