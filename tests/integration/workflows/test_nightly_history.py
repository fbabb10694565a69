"""The nightly workflow's history steps run as the runner runs them (support/workflow_steps.py),
with real git against a local bare origin: the night goes into the history on the
`perf-gate-data` branch and back, change points are found, and `gate baseline update` is never
given a regressed night."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import factories as f
from support.gitrepo import git, origin_and_clone
from support.workflow_steps import run_step
from support.workflows import load

from gate.history.replay import nights
from gate.judge.baseline import load_all
from gate.measure.results import save_results

DOC = load("gate-nightly-baseline.yml")


def night_results(work: Path, rpm: float) -> None:
    folder = work / "nightly" / "perf-gate-baseline-a100"
    folder.mkdir(parents=True, exist_ok=True)
    save_results(f.drain_results([rpm, rpm * 1.01, rpm * 0.99], plan=f.cpu_plan(),
                                 fp=f.fingerprint()), folder / "results.json")


def step(name: str, tmp_path: Path, work: Path, **env):
    proc, _ = run_step(DOC, "update", name, tmp_path, event_name="schedule", cwd=work,
                       event={"repository": {"default_branch": "main"}},
                       extra_env={"BRANCH": "main", "GH_TOKEN": "ghs_x", **env})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture
def nightly(tmp_path):
    origin, work = origin_and_clone(tmp_path)
    return origin, work


def one_night(tmp_path: Path, work: Path, i: int, rpm: float) -> str:
    """Fetch the history, record night `i`, update the baselines, push the history."""
    runner_temp = tmp_path / f"night{i}"
    runner_temp.mkdir()
    git(work, "commit", "-q", "--allow-empty", "-m", f"night {i}")
    sha = git(work, "rev-parse", "HEAD")
    night_results(work, rpm)
    out = []
    for name in ("Fetch the history", "Record the night, find change points",
                 "Update the baselines", "Push the history"):
        proc, _ = run_step(DOC, "update", name, runner_temp, event_name="schedule", cwd=work,
                           event={"repository": {"default_branch": "main"}},
                           extra_env={"BRANCH": "main", "COMMIT": sha, "GH_TOKEN": "ghs_x"})
        assert proc.returncode == 0, (name, proc.stdout[-3000:] + proc.stderr[-3000:])
        out.append(proc.stdout)
    return "\n".join(out)


def test_nights_go_into_the_history_branch_and_a_regressed_night_is_not_promoted(tmp_path,
                                                                                 nightly):
    origin, work = nightly
    values = nights(9, level=233.0, sd=0.02, seed=3, step_at=6, step=0.5)
    logs = [one_night(tmp_path, work, i, rpm) for i, rpm in enumerate(values)]
    # the history went to perf-gate-data each night, and came back the next
    files = git(origin, "ls-tree", "--name-only", "perf-gate-data").split()
    assert sorted(files) == ["changepoints.json", "dashboard.html", "history.sqlite"]
    assert git(origin, "rev-list", "--count", "perf-gate-data") == "9"
    assert "no perf-gate-data branch yet" in logs[0] and "no perf-gate-data" not in logs[1]
    # healthy nights were promoted, the slow ones never
    baselines = work / ".github" / "perf-gate-baselines"
    (path, baseline) = load_all(baselines)[0]
    assert 220 < baseline.figures["drain.req_per_min"].point < 250
    assert all("not promoted to baseline" in log for log in logs[6:])
    assert not any("not promoted to baseline" in log for log in logs[:6])
    assert "regression" in logs[-1]  # detection's table names the change point
