"""gate/judge/noise.py: estimating a calibration run from A/A blocks (between server pairs,
between rounds, one build's own rounds), a build's own spreads from the base side of an A/B,
pooling runs (the same design only), the runner key, the YAML file (schema v3, v1 and v2
read), matching."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from support.calibrations import calibration_run
from support.factories import fingerprint
from support.paths import REPO_ROOT

from gate.core.errors import EXIT_BAD_INPUT, EXIT_ERROR, GateError, MeasurementError
from gate.judge import noise
from gate.judge.noise import CalibrationDesign, CalibrationKey
from gate.judge.sequential import RoundPair
from gate.runner.gpus import Gpu

KEY = CalibrationKey(plan="cpu-smoke", plan_hash="abc123",
                     runner_key="cpu: Test CPU 9000; cpus 2; quota none")
PERSISTENT2 = CalibrationDesign(servers="persistent", rounds_per_block=2)
SHIPPED = REPO_ROOT / "baselines" / "noise" / "cpu-smoke--cpu-amd-epyc.yaml"


def aa_blocks(blocks: int, between: float, within: float, seed: int, size: int = 2,
              offset: float = 0.0) -> list[RoundPair]:
    """(base, head) per round: a server pair offset per block, round noise on top."""
    rng = np.random.default_rng(seed)
    pair = np.repeat(rng.normal(offset, between, blocks), size)
    d = pair + rng.normal(0, within, blocks * size)
    base = 300.0 * np.exp(rng.normal(0, 0.03, blocks * size))
    return [RoundPair(r, b, h) for r, (b, h) in enumerate(zip(base.tolist(),
                                                               (base * np.exp(d)).tolist(),
                                                               strict=True))]


def rounds(*figures: tuple[float, float]) -> list[RoundPair]:
    return [RoundPair(r, b, h) for r, (b, h) in enumerate(figures)]


def run_of(seed: int = 0, blocks: int = 6, **kw) -> noise.CalibrationRun:
    pairs = {"drain.req_per_min": aa_blocks(blocks, 0.03, 0.02, seed, **kw),
             "sweep.c8.tpot_p50_ms": aa_blocks(blocks, 0.0, 0.04, seed + 1, **kw)}
    return noise.estimate_run(pairs, PERSISTENT2, noise.make_provenance(command="test"),
                              noise.CalibrationCost(pair_s=70.0, round_s=65.0),
                              {"drain.req_per_min": "req/min"})


# ---------------------------------------------------------------- estimate


def test_a_run_keeps_each_blocks_mean_and_the_spread_around_it():
    pairs = aa_blocks(5, 0.03, 0.02, 1)
    c = noise.estimate_check("drain.req_per_min", pairs, 2, "req/min")
    d = np.array([math.log(p.head / p.base) for p in pairs]).reshape(5, 2)
    assert c.block_means == pytest.approx(d.mean(axis=1).tolist())
    within = math.sqrt(((d - d.mean(axis=1, keepdims=True)) ** 2).sum() / 5)
    assert c.within_sd == pytest.approx(within) and c.within_df == 5
    assert c.sigma_single is not None and c.single_df == 9 and c.unit == "req/min"
    # one build's own rounds: both sides are that build, 5 df each
    logs = np.log([[p.base, p.head] for p in pairs]).reshape(5, 2, 2)
    side = ((logs - logs.mean(axis=1, keepdims=True)) ** 2).sum() / 10
    assert c.side_within_sd == pytest.approx(math.sqrt(side)) and c.side_within_df == 10
    # a last, incomplete block is left out
    extra = [*pairs, RoundPair(10, 300.0, 301.0)]
    assert len(noise.estimate_check("x", extra, 2).block_means) == 5
    # a round missing on one side takes its block out: it does not shift the later rounds
    gap = [p for p in pairs if p.round != 3]
    assert noise.estimate_check("x", gap, 2).block_means == pytest.approx(
        [c.block_means[i] for i in (0, 2, 3, 4)])


def test_estimate_refuses_broken_calibrations():
    with pytest.raises(GateError, match="make no whole block") as err:
        noise.estimate_check("drain.req_per_min", rounds((300.0, 301.0)), 2)
    assert err.value.exit_code == EXIT_BAD_INPUT
    with pytest.raises(MeasurementError, match=r"drain.req_per_min: round\(s\) \[2\]") as err:
        noise.estimate_check("drain.req_per_min", rounds((300.0, 301.0), (0.0, 299.0)), 2)
    assert err.value.exit_code == EXIT_ERROR
    with pytest.raises(MeasurementError, match="spread 0"):
        noise.estimate_check("sweep.c8.tpot_p50_ms", rounds(*[(10.0, 11.0), (20.0, 22.0)] * 2),
                             2)
    with pytest.raises(GateError, match="no paired figures"):
        noise.estimate_run({}, PERSISTENT2, noise.make_provenance())


def test_a_systematic_side_difference_is_named():
    shifted = noise.estimate_run({"drain.req_per_min": aa_blocks(10, 0.02, 0.02, 4, offset=0.08)},
                                 PERSISTENT2, noise.make_provenance())
    warnings = noise.offset_warnings(shifted)
    assert len(warnings) == 1 and "drain.req_per_min" in warnings[0]
    assert re.search(r"differ by \+[789]\.\d% on average over 10 A/A server pairs", warnings[0])
    assert noise.offset_warnings(run_of(4, blocks=10)) == []


# ---------------------------------------------------------------- pooling and priors


def test_the_spread_between_server_pairs_is_recovered():
    """Many blocks: the block means' spread is between**2 + within**2 / B, and the pooled
    between-server estimate comes back near the truth; the check without offsets near 0."""
    runs = [run_of(seed, blocks=40) for seed in range(0, 10, 2)]
    pooled = noise.pool(runs, "drain.req_per_min", PERSISTENT2)
    assert pooled.block_df >= noise.ENOUGH_BLOCK_DF
    spread = pooled.spread()
    assert spread is not None
    assert spread.between == pytest.approx(0.03, rel=0.35)
    assert spread.within == pytest.approx(0.02, rel=0.2)
    assert noise.pool(runs, "sweep.c8.tpot_p50_ms", PERSISTENT2).spread().between < 0.015


def test_runs_pool_newest_first_until_enough_blocks():
    runs = [run_of(seed, blocks=4) for seed in range(5)]  # 3 df each
    pooled = noise.pool(runs, "drain.req_per_min", PERSISTENT2)
    assert pooled.runs == 3 and pooled.block_df == 9 and pooled.blocks == 12
    one = noise.pool(runs[:1], "drain.req_per_min", PERSISTENT2)
    assert one.block_df == 3
    other = noise.pool(runs, "drain.req_per_min", CalibrationDesign(servers="persistent",
                                                                    rounds_per_block=4))
    assert other.block_df == 0 and other.prior("x") is None  # no block of that size measured


def test_a_prior_for_the_test_and_its_source():
    n = noise.Noise((noise.NoiseCalibration(**KEY.model_dump(), runs=[run_of(blocks=10)]),),
                    "cal.yaml")
    p = n.prior("drain.req_per_min", PERSISTENT2)
    pooled = n.pooled("drain.req_per_min", PERSISTENT2)
    assert p is not None and p.block_df == 9 and p.df == 9
    assert p.block_sd == pytest.approx(math.sqrt(pooled.block_var))
    assert p.side_within_sd is not None and p.side_within_df == 20
    assert "10 blocks of 2 rounds from 1 run(s) (cal.yaml)" in p.source
    assert n.prior("sweep.c32.tpot_p50_ms", PERSISTENT2) is None
    single = noise.single_prior(n, "drain.req_per_min", 12.5)
    assert single.df == 19 and "cal.yaml" in single.source
    fallback = noise.single_prior(noise.Noise(), "drain.req_per_min", 12.5)
    assert fallback.df == noise.FALLBACK_PRIOR_DF and "no calibration" in fallback.source
    assert n.cost(PERSISTENT2) is not None


def test_block_means_that_scattered_less_than_their_rounds_do_not_shrink_the_prior():
    """As measured on a 2-core AMD EPYC runner (TPOT p50 at c=8): ten block means 4.5% apart
    while a round varied 11.8% around its block's mean. A block of two such rounds varies at
    least 11.8%/sqrt(2) = 8.3%; a prior of 4.5% set healthy A/Bs aside as noisier than their
    calibration and let the sizing promise a design that failed 7% of healthy A/Bs."""
    rng = np.random.default_rng(3)
    within = rng.normal(0.0, 0.118, size=(10, 2))
    within -= within.mean(axis=1, keepdims=True)  # every spread inside the blocks...
    means = rng.normal(0.0, 1.0, size=10)
    means = 0.045 * (means - means.mean()) / means.std(ddof=1)  # ...block means 4.5% apart
    check = noise.CheckNoise(block_means=means.tolist(),
                             within_sd=float(np.sqrt((within**2).sum() / 10)), within_df=10)
    run = noise.CalibrationRun(provenance=noise.make_provenance(), design=PERSISTENT2,
                               checks={"sweep.c8.tpot_p50_ms": check})
    pooled = noise.pool([run], "sweep.c8.tpot_p50_ms", PERSISTENT2)
    assert math.sqrt(pooled.block_var) == pytest.approx(0.045)
    prior = pooled.prior("x")
    assert prior is not None and prior.block_sd == pytest.approx(check.within_sd / math.sqrt(2))
    # the same model as the spread the sizing simulates: no negative between-pair variance
    spread = pooled.spread()
    assert spread is not None and spread.between == 0.0
    assert prior.block_sd == pytest.approx(math.sqrt(spread.between**2 + spread.within**2 / 2))


def test_the_base_side_of_an_ab_gives_that_builds_own_spreads_only():
    """An A/B whose base is a trusted build: its base side measures that build's round-to-round
    spread on one server and its spread across rounds, never paired block means (the head
    ran other code)."""
    figures = {r: 300.0 * (1.02 if r % 2 else 0.98) for r in range(8)}
    side = noise.estimate_side("drain.req_per_min", figures, 2, "req/min")
    assert side is not None and side.block_means == [] and side.within_sd is None
    assert side.side_within_df == 4
    assert side.side_within_sd == pytest.approx(math.log(1.02 / 0.98) / math.sqrt(2))
    assert noise.estimate_side("x", {0: 300.0}, 2) is None  # no whole block
    run = noise.CalibrationRun(provenance=noise.make_provenance(), design=PERSISTENT2,
                               checks={"drain.req_per_min": side})
    pooled = noise.pool([run, run_of(blocks=10)], "drain.req_per_min", PERSISTENT2)
    assert pooled.block_df == 9 and pooled.side_within_df == 4 + 20  # both pool
    with pytest.raises(ValueError, match="block means or a one-build spread"):
        noise.CheckNoise()


def test_a_calibration_counts_for_its_own_isolation_only():
    run = run_of(blocks=10)
    paused = CalibrationDesign(servers="persistent", rounds_per_block=2, isolation="paused")
    assert noise.pool([run], "drain.req_per_min", paused).block_df == 0
    assert noise.pool([run], "drain.req_per_min", PERSISTENT2).block_df == 9


# ---------------------------------------------------------------- the runner key


def test_the_runner_key_holds_what_changes_noise():
    assert noise.runner_key(fingerprint(cores=2)) == "cpu: Test CPU; cpus 2; quota none"
    assert noise.runner_key(fingerprint(cores=64, quota=12.0)) == "cpu: Test CPU; cpus 64; quota 12"
    fp = fingerprint("NVIDIA A100-SXM4-80GB", gpus=2, cores=16)
    fp.gpus = [Gpu(name="NVIDIA A100-SXM4-80GB", memory_total_mib=81920)] * 2
    assert noise.runner_key(fp) == "gpu: 2x NVIDIA A100-SXM4-80GB 81920 MiB; cpus 16; quota none"


# ---------------------------------------------------------------- files


def test_store_adds_runs_newest_first_and_moves_another_plan_hash_to_history(tmp_path):
    path = noise.store_run(tmp_path, KEY, run_of(0))
    assert path.name == "cpu-smoke--cpu-test-cpu-9000-cpus-2-quota-none.yaml"
    assert noise.store_run(tmp_path, KEY, run_of(1)) == path
    cal = noise.load_calibration(path)
    assert len(cal.runs) == 2 and cal.runs[0] == run_of(1) and cal.schema_version == 3
    moved = noise.store_run(tmp_path, KEY.model_copy(update={"plan_hash": "def456"}), run_of(2))
    cal = noise.load_calibration(moved)
    assert moved == path and cal.plan_hash == "def456" and cal.runs == [run_of(2)]
    assert [h.plan_hash for h in cal.history] == ["abc123", "abc123"]


def test_a_v1_file_is_read_as_one_block_without_a_between_server_spread(tmp_path):
    cal = noise.load_calibration(_write(tmp_path / "v1.yaml", _V1_EXAMPLE))
    assert cal.runner_key == "cpu: Test CPU 9000; *"  # any CPUs and quota: v1 did not say
    assert noise.calibration_mismatches(cal.identity, KEY) == []
    drain = cal.runs[0].checks["drain.req_per_min"]
    assert drain.block_means == [0.01] and drain.within_sd == 0.03 and drain.within_df == 11
    assert "read from schema v1" in cal.runs[0].provenance.note
    n = noise.Noise((cal,), "v1")
    assert n.prior("drain.req_per_min", PERSISTENT2) is None  # no between-server spread
    # nor does its spread of a round over a block of 12 count for blocks of 2
    assert n.pooled("drain.req_per_min", PERSISTENT2).within_df == 0
    twelve = CalibrationDesign(servers="persistent", rounds_per_block=12)
    assert n.pooled("drain.req_per_min", twelve).within_df == 11


def test_the_shipped_calibration_is_read_and_its_one_pair_does_not_pool_into_blocks_of_two():
    """The shipped file's 12 rounds of one server pair carry drift a block of 2 does not: a
    runner's short calibration of blocks of 2 pools only with blocks of 2 (before, its spread
    of a round borrowed the 12-round one: within_df 4 + 11)."""
    cal = noise.load_calibration(SHIPPED)
    assert cal.schema_version == 2 and cal.runner_key == "cpu: AMD EPYC; cpus 2; quota none"
    assert cal.runs[0].checks["drain.req_per_min"].within_df == 11 and len(cal.history) == 1
    key = cal.identity
    more = noise.NoiseCalibration(**key.model_dump(), runs=[run_of(blocks=4), *cal.runs])
    pooled = noise.Noise((more,), "x").pooled("drain.req_per_min", PERSISTENT2)
    assert pooled.block_df == 3 and pooled.within_df == 4


def test_a_v1_file_is_upgraded_when_a_run_is_added(tmp_path):
    path = _write(tmp_path / "old.yaml", _V1_EXAMPLE)
    key = noise.load_calibration(path).identity
    assert noise.store_run(tmp_path, key, run_of(0)) == path
    cal = noise.load_calibration(path)
    assert cal.schema_version == 3 and len(cal.runs) == 2


_V1_EXAMPLE = {
    "schema_version": 1, "plan": "cpu-smoke", "plan_hash": "abc123",
    "hardware_key": "cpu: Test CPU 9000",
    "provenance": {"date": "2026-11-30", "gate_version": "0.1.0"},
    "checks": {"drain.req_per_min": {"sigma": 0.03, "pairs": 12, "aa_mean": 0.01}},
}


def _write(path: Path, data: dict | str) -> Path:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def test_broken_files_name_the_key(tmp_path):
    good = noise.NoiseCalibration(**KEY.model_dump(), runs=[run_of()]).model_dump(mode="json")
    bad = {**good, "colour": "red"}
    bad["runs"][0]["checks"]["drain.req_per_min"]["within_sd"] = -1
    with pytest.raises(GateError) as err:
        noise.load_calibration(_write(tmp_path / "bad.yaml", bad))
    msg = str(err.value)
    assert err.value.exit_code == EXIT_BAD_INPUT
    assert "runs.0.checks.drain.req_per_min.within_sd" in msg and "colour: unknown key" in msg
    with pytest.raises(GateError, match="not valid YAML"):
        noise.load_calibration(_write(tmp_path / "junk.yaml", "runs: [unclosed"))
    with pytest.raises(GateError, match="mapping"):
        noise.load_calibration(_write(tmp_path / "list.yaml", "- 1\n"))
    with pytest.raises(GateError, match=r"schema v9; this gate reads v1, v2, v3: calibrate again"):
        noise.load_calibration(_write(tmp_path / "v9.yaml", {**good, "schema_version": 9}))
    with pytest.raises(GateError, match=r"(?s)schema v1\).*checks.drain.req_per_min.sigma"):
        noise.load_calibration(_write(tmp_path / "v1.yaml", {
            **_V1_EXAMPLE, "checks": {"drain.req_per_min": {"sigma": -1, "pairs": 12}}}))
    with pytest.raises(GateError, match="does not exist"):
        noise.load_calibration(tmp_path / "nothing.yaml")


def test_find_pools_every_match_and_names_what_did_not(tmp_path):
    noise.store_run(tmp_path / "a", KEY, run_of(0))
    noise.store_run(tmp_path / "b", KEY.model_copy(update={"runner_key": "cpu: Test*"}), run_of(1))
    lookup = noise.find_calibrations([tmp_path / "a", tmp_path / "b"], KEY)
    assert len(lookup.matches) == 2 and len(lookup.noise().runs()) == 2
    other = KEY.model_copy(update={"runner_key": "cpu: Test CPU 9000; cpus 4; quota none"})
    text = noise.find_calibrations([tmp_path / "a"], other).describe()
    assert "runner: calibration 'cpu: Test CPU 9000; cpus 2; quota none'" in text
    moved = KEY.model_copy(update={"plan_hash": "def456"})
    assert "gate calibrate again" in noise.find_calibrations([tmp_path / "a"], moved).describe()
    assert noise.find_calibrations([tmp_path / "absent"], KEY).describe() == \
        "no calibration found"


def test_find_never_skips_a_broken_file(tmp_path):
    noise.store_run(tmp_path, KEY, run_of(0))
    _write(tmp_path / "zz.yaml", "plan: [")
    with pytest.raises(GateError, match="zz.yaml is not valid YAML"):
        noise.find_calibrations([tmp_path], KEY)


def test_the_cache_folder_is_always_read(tmp_path):
    assert noise.noise_dirs(None, tmp_path) == [noise.DEFAULT_NOISE_DIR, tmp_path / "noise"]
    assert noise.noise_dirs([Path("x")], tmp_path) == [Path("x"), tmp_path / "noise"]


def test_store_leaves_the_stored_file_alone_when_it_fails(tmp_path, monkeypatch):
    path = noise.store_run(tmp_path, KEY, run_of(0))
    before = path.read_text()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", broken_replace)
    with pytest.raises(OSError):
        noise.store_run(tmp_path, KEY, run_of(5))
    monkeypatch.undo()
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    path.write_text("runs: [")  # a stored file that does not load is not replaced either
    with pytest.raises(GateError, match="not valid YAML"):
        noise.store_run(tmp_path, KEY, run_of(6))
    assert path.read_text() == "runs: ["


def test_a_test_calibration_matches_its_own_key():
    run = calibration_run()
    assert run.design == PERSISTENT2 and run.cost is not None
