"""gate/judge/noise.py: estimating a noise profile from A/A rounds, its YAML file, matching, storing."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from gate.core.errors import EXIT_BAD_INPUT, EXIT_ERROR, GateError, MeasurementError
from gate.core.store import dump_record
from gate.judge import noise
from gate.judge.noise import CalibrationKey, NoiseCalibration

CPU = CalibrationKey(plan="cpu-smoke", plan_hash="abc123", hardware_key="cpu: Test CPU 9000")


def _aa_pairs(rounds: int, sigma: float, seed: int, offset: float = 0.0) -> list[tuple[float, float]]:
    rng = np.random.default_rng(seed)
    base = 300.0 * np.exp(rng.normal(0, sigma / math.sqrt(2), rounds))
    head = 300.0 * np.exp(offset + rng.normal(0, sigma / math.sqrt(2), rounds))
    return list(zip(base.tolist(), head.tolist(), strict=True))


def _profile(identity: CalibrationKey = CPU, seed: int = 0, rounds: int = 8) -> NoiseCalibration:
    pairs = {"drain.req_per_min": _aa_pairs(rounds, 0.06, seed),
             "sweep.c8.tpot_p50_ms": _aa_pairs(rounds, 0.04, seed + 1)}
    prov = noise.make_provenance(runner="2 cores", command="gate calibrate --rounds 8")
    return noise.estimate_calibration(pairs, identity, prov, {"drain.req_per_min": "req/min"})


# ---------------------------------------------------------------- estimate


def test_estimate_is_the_spread_of_the_paired_log_ratio():
    pairs = _aa_pairs(12, 0.05, 3)
    c = noise.estimate_check("drain.req_per_min", pairs, "req/min")
    d = [math.log(h / b) for b, h in pairs]
    assert c.sigma == pytest.approx(np.std(d, ddof=1))
    assert c.pairs == 12 and c.prior_df == 11 and c.aa_mean == pytest.approx(np.mean(d))
    assert c.sigma_single is not None and c.unit == "req/min"


def test_estimate_refuses_broken_calibrations():
    with pytest.raises(GateError, match="at least 2 rounds") as err:
        noise.estimate_check("drain.req_per_min", [(300.0, 301.0)])
    assert err.value.exit_code == EXIT_BAD_INPUT
    with pytest.raises(MeasurementError, match=r"drain.req_per_min: round\(s\) \[2\]") as err:
        noise.estimate_check("drain.req_per_min", [(300.0, 301.0), (0.0, 299.0), (300.0, 290.0)])
    assert err.value.exit_code == EXIT_ERROR
    with pytest.raises(MeasurementError, match="spread 0"):
        noise.estimate_check("sweep.c8.tpot_p50_ms", [(10.0, 11.0), (20.0, 22.0)])
    with pytest.raises(GateError, match="no paired figures"):
        noise.estimate_calibration({}, CPU, noise.make_provenance())


def test_a_systematic_server_difference_is_named():
    shifted = noise.estimate_calibration({"drain.req_per_min": _aa_pairs(20, 0.03, 4, offset=0.08)},
                                     CPU, noise.make_provenance())
    warnings = noise.offset_warnings(shifted)
    assert len(warnings) == 1 and "drain.req_per_min" in warnings[0]
    assert re.search(r"differ by \+[78]\.\d% on average over 20 A/A rounds", warnings[0])
    level = noise.estimate_calibration({"drain.req_per_min": _aa_pairs(20, 0.03, 4)}, CPU,
                                   noise.make_provenance())
    assert noise.offset_warnings(level) == []


# ---------------------------------------------------------------- priors


def test_priors_from_a_profile_or_the_labelled_fallback():
    profile = _profile()
    hit = noise.prior_for(profile, "drain.req_per_min", 12.5, label="x.yaml")
    assert hit.sigma == profile.checks["drain.req_per_min"].sigma and hit.df == 7
    assert "x.yaml" in hit.source and "8 A/A pairs" in hit.source
    missing = noise.prior_for(profile, "sweep.c32.tpot_p50_ms", 12.5, label="x.yaml")
    assert missing.df == noise.FALLBACK_PRIOR_DF and "lacks this check" in missing.source
    none = noise.prior_for(None, "drain.req_per_min", 12.5)
    assert none.sigma == pytest.approx(math.sqrt(2) * math.log1p(0.125))
    assert "fallback" in none.source and "no noise profile" in none.source
    single = noise.prior_for(profile, "drain.req_per_min", 12.5, paired=False)
    assert single.sigma == profile.checks["drain.req_per_min"].sigma_single


# ---------------------------------------------------------------- files


def test_round_trip_and_history(tmp_path):
    first = _profile()
    path = noise.store_calibration(tmp_path, first)
    assert path.name == "cpu-smoke--cpu-test-cpu-9000.yaml"
    loaded = noise.load_calibration(path)
    assert loaded == first
    second = _profile(seed=9)
    assert noise.store_calibration(tmp_path, second) == path
    again = noise.load_calibration(path)
    assert again.checks == second.checks
    assert len(again.history) == 1 and again.history[0].checks == first.checks


def _write(path: Path, data: dict | str) -> Path:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def test_broken_files_name_the_key(tmp_path):
    good = _profile().model_dump(mode="json", exclude_none=True)
    bad = {**good, "checks": {"drain.req_per_min": {"sigma": -0.1, "pairs": 1}}, "colour": "red"}
    with pytest.raises(GateError) as err:
        noise.load_calibration(_write(tmp_path / "bad.yaml", bad))
    msg = str(err.value)
    assert err.value.exit_code == EXIT_BAD_INPUT
    assert "checks.drain.req_per_min.sigma" in msg and "checks.drain.req_per_min.pairs" in msg
    assert "colour: unknown key" in msg
    with pytest.raises(GateError, match="not valid YAML"):
        noise.load_calibration(_write(tmp_path / "junk.yaml", "checks: [unclosed"))
    with pytest.raises(GateError, match="mapping"):
        noise.load_calibration(_write(tmp_path / "list.yaml", "- 1\n"))
    with pytest.raises(GateError, match="schema v9"):
        noise.load_calibration(_write(tmp_path / "v9.yaml", {**good, "schema_version": 9}))
    with pytest.raises(GateError, match="does not exist"):
        noise.load_calibration(tmp_path / "nothing.yaml")


def test_find_names_what_did_not_match(tmp_path):
    noise.store_calibration(tmp_path, _profile())
    other_hw = CPU.model_copy(update={"hardware_key": "1x NVIDIA A100-SXM4-80GB"})
    lookup = noise.find_calibration(tmp_path, other_hw)
    assert lookup.profile is None
    assert "hardware: profile 'cpu: Test CPU 9000', run '1x NVIDIA A100-SXM4-80GB'" in lookup.describe()
    other_plan = CPU.model_copy(update={"plan": "cpu-big", "plan_hash": "def456"})
    text = noise.find_calibration(tmp_path, other_plan).describe()
    assert "plan: profile 'cpu-smoke', run 'cpu-big'" in text and "plan_hash: profile abc123" in text
    assert "gate calibrate" in text
    found = noise.find_calibration(tmp_path, CPU)
    assert found.profile is not None and found.path.name.startswith("cpu-smoke--")
    assert noise.find_calibration(tmp_path / "absent", CPU).describe() == "no noise profile found"


def test_find_never_skips_a_broken_file_or_guesses_between_two(tmp_path):
    noise.store_calibration(tmp_path, _profile())
    _write(tmp_path / "zz.yaml", "plan: [")
    with pytest.raises(GateError, match="zz.yaml is not valid YAML"):
        noise.find_calibration(tmp_path, CPU)
    (tmp_path / "zz.yaml").unlink()
    pattern = _profile(CPU.model_copy(update={"hardware_key": "cpu: Test*"}))
    _write(tmp_path / "pattern.yaml", dump_record(pattern))
    with pytest.raises(GateError, match="several noise profiles"):
        noise.find_calibration(tmp_path, CPU)


def test_store_leaves_the_stored_profile_alone_when_it_fails(tmp_path, monkeypatch):
    path = noise.store_calibration(tmp_path, _profile())
    before = path.read_text()
    # a calibration that failed never yields a profile to store
    with pytest.raises(MeasurementError):
        noise.estimate_calibration({"drain.req_per_min": [(300.0, 300.0), (-1.0, 300.0)]}, CPU,
                               noise.make_provenance())
    # the write itself fails at the last step: the old file stays, no temporary file is left
    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        noise.store_calibration(tmp_path, _profile(seed=5))
    monkeypatch.undo()
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    # a stored file that does not load is not replaced either
    path.write_text("checks: [")
    with pytest.raises(GateError, match="not valid YAML"):
        noise.store_calibration(tmp_path, _profile(seed=6))
    assert path.read_text() == "checks: ["
