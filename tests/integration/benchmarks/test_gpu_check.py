"""benchmarks/gpu_check.sh, ready for the day a GPU is lent: its syntax (bash -n, ShellCheck),
the commands its --dry-run would run within ten minutes, its plan, and its staging helper run
on the CPU (no GPU here)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from support.paths import FIXTURES, REPO_ROOT

from gate.plan.spec import load_plan

SCRIPT = REPO_ROOT / "benchmarks" / "gpu_check.sh"
LIMIT_S = 600


def dry_run(tmp_path: Path) -> list[str]:
    proc = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--out", str(tmp_path / "o"),
                           "--python", sys.executable], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "o").exists()  # a dry run writes nothing
    return [line for line in proc.stdout.splitlines() if line.startswith("+ [")]


def test_the_script_parses_and_passes_shellcheck():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], timeout=30).returncode == 0
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    proc = subprocess.run([shellcheck, "-s", "bash", "-S", "warning", str(SCRIPT)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout


def test_the_dry_run_names_every_step_within_ten_minutes(tmp_path):
    steps = dry_run(tmp_path)
    names = [re.match(r"\+ \[([\w-]+),", s).group(1) for s in steps]
    assert names == ["doctor", "staging", "ab-aa", "ab-slow", "calibrate"]
    limits = [int(re.search(r"at most (\d+)s\]", s).group(1)) for s in steps]
    assert sum(limits) < LIMIT_S
    by_name = dict(zip(names, steps, strict=True))
    assert "bitmask_staging.py --rows 64,384" in by_name["staging"]
    assert f"ab --plan {REPO_ROOT}/benchmarks/gpu_check_plan.yaml" in by_name["ab-aa"]
    assert "--head-env" not in by_name["ab-aa"] and "--rounds 2" in by_name["ab-aa"]
    assert f"--head-env PYTHONPATH={FIXTURES}/slow_bitmask" in by_name["ab-slow"]
    assert "calibrate" in by_name["calibrate"] and "--rounds 3" in by_name["calibrate"]
    assert all(sys.executable in s for s in steps)


def test_the_check_plan_stages_the_seeds_bitmask_on_the_runner_the_fixture_slows():
    plan = load_plan(str(REPO_ROOT / "benchmarks" / "gpu_check_plan.yaml"))
    assert plan.server.tiny_model.vocab_size == 262_144 and plan.server.max_num_seqs == 64
    assert plan.server.speculative_config["num_speculative_tokens"] == 5
    assert plan.server.pinned_runner() == "v1"  # tests/fixtures/slow_bitmask patches V1's path
    assert plan.ab.servers == "persistent" and plan.server.gpu_memory_utilization <= 0.5


def test_the_staging_helper_runs_its_methods(tmp_path):
    """On the CPU (no pinning): every method runs and reports per-step figures."""
    out = tmp_path / "staging.json"
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "bitmask_staging.py"),
                           "--device", "cpu", "--rows", "64", "--steps", "5", "--json",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(out.read_text())["figures"]
    assert {f["method"] for f in figures} >= {"fresh_pinned", "reused_pinned", "np_full"}
    assert all(f["rows"] == 64 and f["mean_us"] > 0 for f in figures)
    assert {f["torch_threads"] for f in figures} >= {1}
