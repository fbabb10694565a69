"""`gate calibrate --add DIR --trusted both|base`: the explicit step a trusted workflow runs to
feed a finished A/B's trusted data into its runner class's calibration (gate.flows.calibrate
.trusted_run). An A/A of one trusted build adds paired rounds like a calibration's; an A/B
whose base is trusted adds only the base build's own spreads; what is not A/A data, a broken
run, or no --trusted is refused and nothing is written."""

from __future__ import annotations

import numpy as np
import pytest
from support.cli import gate_in_process
from support.factories import cell, fingerprint, gpu_plan, make_results

from gate.core.errors import EXIT_BAD_INPUT
from gate.judge.noise import load_all_calibrations
from gate.measure.results import save_results
from gate.plan.spec import apply_overrides

PLAN = apply_overrides(gpu_plan(levels=(8,), repeats=8), ab={"servers": "persistent"})


def side(label: str, factor: float, seed: int, fp=None):
    rng = np.random.default_rng(seed)
    cells = []
    for r in range(8):
        noise = float(np.exp(rng.normal(0, 0.03)))
        cells += [cell("drain", "guided", 64, r, rpm=233.0 * factor * noise),
                  cell("sweep", "guided", 8, r, tpot_p50=20.0 * factor / noise,
                       ttft_p50=50.0 * noise),
                  cell("sweep", "free", 8, r, tpot_p50=10.0 * noise)]
    return make_results(cells, plan=PLAN, label=label, fp=fp,
                        timings={"startup_s": 160.0, "warmup_s": 40.0, "drain_s": 80.0,
                                 "sweep_s": 240.0})


def ab_folder(tmp_path, head_fp=None, broken: bool = False):
    out = tmp_path / "ab"
    for label, res in (("base", side("base", 1.0, 1)), ("head", side("head", 1.0, 2, head_fp))):
        if broken and label == "head":
            res = res.model_copy(update={"status": "error", "errors": ["server died"]})
        (out / label).mkdir(parents=True)
        save_results(res, out / label / "results.json")
    return out


def stored(folder):
    return [cal for _, cal in load_all_calibrations(folder)]


def test_an_aa_of_one_trusted_build_adds_paired_rounds(tmp_path):
    out = ab_folder(tmp_path)
    proc = gate_in_process("calibrate", "--add", out, "--trusted", "both", "--noise-dir",
                           tmp_path / "noise")
    assert proc.returncode == 0, proc.stderr
    assert "added paired A/A rounds of 8 rounds" in proc.stdout
    (cal,) = stored(tmp_path / "noise")
    run = cal.runs[0]
    assert run.design.rounds_per_block == 2 and run.cost is not None
    drain = run.checks["drain.req_per_min"]
    assert len(drain.block_means) == 4 and drain.side_within_df == 8
    assert f"added from {out} (trusted: both)" in run.provenance.note
    again = gate_in_process("calibrate", "--add", out, "--trusted", "both", "--noise-dir",
                            tmp_path / "noise")
    assert again.returncode == 0 and len(stored(tmp_path / "noise")[0].runs) == 2


def test_an_added_aa_prices_a_server_pair_by_both_builds_waits(tmp_path):
    """Each build waited 160 s for its servers over 4 blocks, one wait after the other (the
    second starts when the first ends), and warmed up 40 s: a pair costs (2 x 160 + 2 x 40) /
    4 = 100 s on the clock, not half the waits; a round both builds' cells, 2 x 320 / 8."""
    out = ab_folder(tmp_path)
    proc = gate_in_process("calibrate", "--add", out, "--trusted", "both", "--noise-dir",
                           tmp_path / "noise")
    assert proc.returncode == 0, proc.stderr
    cost = stored(tmp_path / "noise")[0].runs[0].cost
    assert cost is not None
    assert cost.pair_s == pytest.approx(100.0) and cost.round_s == pytest.approx(80.0)


def test_the_base_side_of_an_ab_adds_only_its_own_spreads(tmp_path):
    other = fingerprint("NVIDIA A100-SXM4-80GB").model_copy(update={"versions": {"vllm": "0.99"}})
    out = ab_folder(tmp_path, head_fp=other)
    refused = gate_in_process("calibrate", "--add", out, "--trusted", "both", "--noise-dir",
                              tmp_path / "noise")
    assert refused.returncode == EXIT_BAD_INPUT
    assert "not A/A data" in refused.stderr and "--trusted base" in refused.stderr
    assert not (tmp_path / "noise").exists()
    proc = gate_in_process("calibrate", "--add", out, "--trusted", "base", "--noise-dir",
                           tmp_path / "noise")
    assert proc.returncode == 0, proc.stderr
    assert "the base build's own spreads" in proc.stdout
    run = stored(tmp_path / "noise")[0].runs[0]
    assert all(c.block_means == [] and c.side_within_df == 4 for c in run.checks.values())


@pytest.mark.parametrize(("args", "why"), [
    (["--trusted", "both"], "its measurement broke"),
    ([], "--add needs --trusted"),
])
def test_what_is_no_trusted_data_is_refused_and_nothing_is_written(tmp_path, args, why):
    out = ab_folder(tmp_path, broken=True)
    proc = gate_in_process("calibrate", "--add", out, *args, "--noise-dir", tmp_path / "noise")
    assert proc.returncode == EXIT_BAD_INPUT and why in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "noise").exists()
