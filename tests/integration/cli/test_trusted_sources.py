"""What the shipped GPU workflows switch off, through the gate's own settings (security review
round three, H1 and M3), as real subprocesses:

- GATE_BUILTIN_PLANS_ONLY=true: every command that takes --plan refuses a plan file (its
  server section says what command the job runs) before anything starts, and a resumed A/B
  whose results name another server launch than its built-in plan's is refused;
- GATE_CACHE_CALIBRATIONS=false: `gate compare` (and `gate ab`), `gate report` (the A/B's
  look-by-look replay) and `gate baseline update` (the comparison with the stored baseline)
  read no calibration from the cache folder, where an earlier job on a persistent runner
  could have planted one, and `gate ab --calibrate`, which would write there, is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from support import factories as f
from support.calibrations import store_for
from support.cli import gate_subprocess

from gate.measure.results import save_results
from gate.plan.spec import builtin_plan_path, builtin_server_problem, load_plan

ONLY_BUILTIN = {"GATE_BUILTIN_PLANS_ONLY": "true"}


def evil_plan(tmp_path: Path) -> tuple[Path, Path]:
    """cpu-smoke with its server launched as a command that leaves a mark (the review's
    exploit sketch: `server.launch: command`)."""
    mark = tmp_path / "pwned"
    data = yaml.safe_load(builtin_plan_path("cpu-smoke").read_text())
    data["server"].update({"launch": "command", "command": ["sh", "-c", f"touch {mark}"],
                           "startup_timeout_s": 5})
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, mark


@pytest.mark.parametrize("argv", [
    ["run", "--plan", "{plan}", "--out", "{out}"],
    ["ab", "--plan", "{plan}", "--base", "{python}", "--head", "{python}", "--out", "{out}"],
    ["bisect", "--good", "HEAD~1", "--bad", "HEAD", "--plan", "{plan}", "--out", "{out}"],
    ["calibrate", "--plan", "{plan}", "--out", "{out}"],
], ids=lambda argv: argv[0])
def test_a_plan_file_is_refused_before_anything_runs(tmp_path, argv):
    plan, mark = evil_plan(tmp_path)
    filled = [a.format(plan=plan, out=tmp_path / "out", python=f.__file__) for a in argv]
    proc = gate_subprocess(*filled, env=ONLY_BUILTIN, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"plan '{plan}' is not a built-in plan's name" in proc.stderr
    assert "GATE_BUILTIN_PLANS_ONLY" in proc.stderr and "Traceback" not in proc.stderr
    assert not mark.exists()


def test_a_built_in_plan_is_taken_by_name(tmp_path):
    proc = gate_subprocess("scope", "--repo", tmp_path, "--base", "HEAD", "--head", "HEAD",
                           "--plan", "a100-gemma4-26b-pr", "--out", tmp_path / "s.json",
                           env=ONLY_BUILTIN, timeout=120)
    assert "not a built-in plan" not in proc.stderr  # (it fails later: no git repository)


def resumable(tmp_path: Path, **server) -> Path:
    """An A/B folder as an earlier run left it (an artifact): results of both sides whose
    plan is cpu-smoke with `server` changed."""
    plan = load_plan("cpu-smoke")
    plan = plan.model_copy(update={"server": plan.server.model_copy(update=server)})
    out = tmp_path / "ab"
    for label in ("base", "head"):
        (out / label).mkdir(parents=True)
        save_results(f.make_results([f.cell("drain", "guided", 8)], plan=plan, gpu=None),
                     out / label / "results.json")
    (out / "ab-state.json").write_text("{}")
    return out


def test_a_resumed_ab_that_launches_another_server_is_refused(tmp_path):
    folder = resumable(tmp_path, launch="command", command=["sh", "-c", "id"])
    proc = gate_subprocess("ab", "--resume", folder, env=ONLY_BUILTIN, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "launches its server otherwise than the built-in plan (server.command, " \
           "server.launch)" in proc.stderr


def test_a_built_in_plans_server_matches_itself_whatever_its_backend_or_runner_pin():
    plan = load_plan("cpu-smoke")
    assert builtin_server_problem(plan) is None
    assert builtin_server_problem(plan.for_backend("guidance")) is None
    env = {**plan.server.env, "LD_PRELOAD": "/tmp/x.so"}
    changed = plan.model_copy(update={"server": plan.server.model_copy(update={"env": env})})
    assert "server.env" in (builtin_server_problem(changed) or "")
    named = plan.model_copy(update={"name": "mine"})
    assert builtin_server_problem(named) == "plan 'mine' is not a built-in plan"


# -- calibrations from the cache folder ------------------------------------------------
def compare_with_a_planted_calibration(tmp_path: Path, env: dict[str, str]) -> dict:
    base, head = f.drain_results([233.0, 232.0]), f.drain_results([230.0, 231.0])
    save_results(base, tmp_path / "base.json")
    save_results(head, tmp_path / "head.json")
    cache = tmp_path / "cache"
    planted = store_for(cache / "noise", head, between=0.5, within=0.5)  # noise that hides all
    reviewed = tmp_path / "reviewed-noise"
    reviewed.mkdir()
    proc = gate_subprocess("compare", tmp_path / "head.json", "--against", tmp_path / "base.json",
                           "--noise-dir", reviewed, "--out", tmp_path / "verdict.json",
                           env={"GATE_CACHE_DIR": str(cache), **env}, timeout=120)
    assert proc.returncode in (0, 1, 3), proc.stderr
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    return {"profile": verdict["noise_profile"], "planted": str(planted)}


def test_the_cache_folders_calibration_is_read_by_default(tmp_path):
    seen = compare_with_a_planted_calibration(tmp_path, {})
    assert seen["planted"] in seen["profile"]


def test_the_gpu_workflows_setting_reads_no_calibration_from_the_cache_folder(tmp_path):
    """M3: a calibration an earlier job planted in ~/.cache/gate/noise must not set a PR's
    noise; the workflows read the base commit's reviewed noise/ folder only."""
    seen = compare_with_a_planted_calibration(tmp_path, {"GATE_CACHE_CALIBRATIONS": "false"})
    assert seen["planted"] not in seen["profile"] and "cache" not in seen["profile"]


def test_calibrating_into_an_unread_cache_folder_is_refused(tmp_path):
    proc = gate_subprocess("ab", "--base", f.__file__, "--head", f.__file__, "--calibrate",
                           "--out", tmp_path / "out", env={"GATE_CACHE_CALIBRATIONS": "false"},
                           timeout=120)
    assert proc.returncode == 2 and "GATE_CACHE_CALIBRATIONS=false reads none" in proc.stderr


def planted_broken_calibration(tmp_path: Path) -> Path:
    """A cache folder whose noise/ holds a file the gate refuses to read (a broken file is an
    error, never skipped): a command that reads the folder fails on it, one that does not
    never notices it."""
    cache = tmp_path / "cache"
    (cache / "noise").mkdir(parents=True)
    (cache / "noise" / "planted.yaml").write_text("schema_version: [not a calibration\n")
    return cache


@pytest.mark.parametrize("switch", [{}, {"GATE_CACHE_CALIBRATIONS": "false"}],
                         ids=["default", "off"])
def test_the_report_reads_the_cache_folders_calibrations_only_when_allowed(tmp_path, switch):
    """M3 (round four): `gate report` replays an A/B's sequential test with the calibrations;
    with GATE_CACHE_CALIBRATIONS=false, as gate compare, never the cache folder's."""
    save_results(f.drain_results([233.0, 232.0]), tmp_path / "base.json")
    save_results(f.drain_results([230.0, 231.0]), tmp_path / "head.json")
    reviewed = tmp_path / "reviewed-noise"
    reviewed.mkdir()
    proc = gate_subprocess("compare", tmp_path / "head.json", "--against", tmp_path / "base.json",
                           "--noise-dir", reviewed, "--out", tmp_path / "verdict.json",
                           env={"GATE_CACHE_CALIBRATIONS": "false"}, timeout=120)
    assert proc.returncode in (0, 1, 3), proc.stderr
    assert json.loads((tmp_path / "verdict.json").read_text())["mode"] == "ab"
    cache = planted_broken_calibration(tmp_path)
    proc = gate_subprocess("report", "--verdict", tmp_path / "verdict.json",
                           "--head", tmp_path / "head.json", "--base", tmp_path / "base.json",
                           "--noise-dir", reviewed, "--out", tmp_path / "report.md",
                           env={"GATE_CACHE_DIR": str(cache), **switch}, timeout=120)
    if switch:
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "report.md").is_file()
    else:  # read, so its broken file stops the report
        assert proc.returncode == 2 and "planted.yaml" in proc.stderr, proc.stderr



@pytest.mark.parametrize("switch", [{}, {"GATE_CACHE_CALIBRATIONS": "false"}],
                         ids=["default", "off"])
def test_a_baseline_update_reads_the_cache_folders_calibrations_only_when_allowed(tmp_path,
                                                                                  switch):
    """M3 (round four): the nightly's `gate baseline update` compares the night with the
    stored baseline under the calibrations; with GATE_CACHE_CALIBRATIONS=false never the
    cache folder's."""
    store, reviewed = tmp_path / "baselines", tmp_path / "reviewed-noise"
    reviewed.mkdir()
    cache = planted_broken_calibration(tmp_path)
    env = {"GATE_CACHE_DIR": str(cache), **switch}

    def update(run: Path):
        return gate_subprocess("baseline", "update", run, "--baselines-dir", store, "--branch",
                               "main", "--commit", "a" * 40, "--noise-dir", reviewed, env=env,
                               timeout=120)

    first = update(f.gpu_drain_folder(tmp_path / "first", [230.0, 232.0, 231.0]))
    assert first.returncode == 0, first.stderr  # no stored baseline yet: nothing compared
    proc = update(f.gpu_drain_folder(tmp_path / "second", [231.0, 233.0, 232.0]))
    if switch:
        assert proc.returncode == 0, proc.stderr
    else:  # compared with the stored one under the cache's calibrations: the broken file
        assert proc.returncode == 2 and "planted.yaml" in proc.stderr, proc.stderr
