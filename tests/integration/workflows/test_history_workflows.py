"""The history's workflows run as the runner runs them (support/workflow_steps.py), with real
git against a local bare origin: the nightly's night goes into the history on the
`perf-gate-data` branch and back, change points are found, and `gate baseline update` is never
given a regressed night; gate-acknowledge.yml keeps a writer's acknowledgement there and
refuses anyone else's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support import factories as f
from support.fake_github import FakeGitHub
from support.gitrepo import git, origin_and_clone
from support.workflow_steps import REPO, SHA_B, TOKEN, run_step
from support.workflows import load

from gate.history.replay import nights
from gate.history.store import opened
from gate.judge.baseline import load_all
from gate.measure.results import save_results

DOC = load("gate-nightly-baseline.yml")


def night_results(work: Path, rpm: float) -> None:
    folder = work / "nightly" / "perf-gate-baseline-a100"
    folder.mkdir(parents=True, exist_ok=True)
    save_results(f.drain_results([rpm, rpm * 1.01, rpm * 0.99], plan=f.cpu_plan(),
                                 fp=f.fingerprint()), folder / "results.json")


@pytest.fixture
def nightly(tmp_path):
    origin, work = origin_and_clone(tmp_path)
    return origin, work


VALUES = nights(9, level=233.0, sd=0.02, seed=3, step_at=6, step=0.5)
HEALTHY = 6  # the nights before the step


@pytest.fixture(scope="module")
def six_healthy_nights(tmp_path_factory):
    """The nightly's first six nights, all healthy, as the two tests of a step share them:
    (origin, work, logs). Each test continues on its own copy (healthy_copy)."""
    tmp = tmp_path_factory.mktemp("nights")
    origin, work = origin_and_clone(tmp)
    with FakeGitHub(REPO) as fake:
        fake.good_tokens.add(TOKEN)
        fake.permissions["maintainer"] = "write"
        fake.pulls[12] = {"number": 12, "head": {"sha": SHA_B}, "state": "open"}
        logs = [one_night(tmp, work, i, rpm, fake) for i, rpm in enumerate(VALUES[:HEALTHY])]
    return origin, work, logs


def healthy_copy(six_healthy_nights, tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """A copy of the six nights' origin and clone in `tmp_path`, the clone's origin the copy."""
    origin, work, logs = six_healthy_nights
    origin_copy, work_copy = tmp_path / "origin.git", tmp_path / "work"
    shutil.copytree(origin, origin_copy)
    shutil.copytree(work, work_copy, symlinks=True)
    git(work_copy, "remote", "set-url", "origin", str(origin_copy))
    return origin_copy, work_copy, list(logs)


def one_night(tmp_path: Path, work: Path, i: int, rpm: float, fake: FakeGitHub | None = None
              ) -> str:
    """Fetch the history, link the merged PRs' acknowledgements, record night `i`, update the
    baselines, push the history."""
    runner_temp = tmp_path / f"night{i}"
    runner_temp.mkdir()
    git(work, "commit", "-q", "--allow-empty", "-m", f"night {i}")
    sha = git(work, "rev-parse", "HEAD")
    night_results(work, rpm)
    out = []
    for name in ("Fetch the history", "Link the merged PRs' acknowledgements",
                 "Record the night, find change points", "Update the baselines",
                 "Push the history"):
        proc, _ = run_step(DOC, "update", name, runner_temp, event_name="schedule", cwd=work,
                           event={"repository": {"default_branch": "main"}}, fake=fake,
                           extra_env={"BRANCH": "main", "COMMIT": sha, "GH_TOKEN": "ghs_x"})
        assert proc.returncode == 0, (name, proc.stdout[-3000:] + proc.stderr[-3000:])
        out.append(proc.stdout)
    return "\n".join(out)


def test_nights_go_into_the_history_branch_and_a_regressed_night_is_not_promoted(
        tmp_path, six_healthy_nights):
    origin, work, logs = healthy_copy(six_healthy_nights, tmp_path)
    logs += [one_night(tmp_path, work, i, rpm) for i, rpm in enumerate(VALUES[HEALTHY:], HEALTHY)]
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


ACK = load("gate-acknowledge.yml")
STEP = "Acknowledge (write access checked through the API)"


def acknowledge(tmp_path: Path, work: Path, fake: FakeGitHub, head: str, actor: str = "maintainer"):
    """gate-acknowledge.yml's job: a writer acknowledges the drain check of PR 12 at `head`."""
    inputs = {"pr": "12", "sha": head, "check": "drain.req_per_min",
              "reason": "pinned memory is needed for correctness"}
    tmp_path.mkdir()
    for name in ("Fetch the history", STEP, "Push the history"):
        proc, _ = run_step(ACK, "acknowledge", name, tmp_path, event_name="workflow_dispatch",
                           cwd=work, inputs=inputs, fake=fake,
                           extra_env={"GH_TOKEN": "ghs_x", "LOGIN": actor})
        assert proc.returncode == 0, (name, proc.stdout + proc.stderr)


def test_an_acknowledged_slowdown_merged_moves_the_history_and_the_baseline(
        tmp_path, six_healthy_nights):
    """The nightly links the merged PR's acknowledgement to the commit it became (GitHub's
    merge_commit_sha), detection marks the change point whose range holds that commit as
    acknowledged (git ancestry in the update job's clone), and the slower level becomes the
    baseline with the acknowledgement named, once the change point holds."""
    origin, work, logs = healthy_copy(six_healthy_nights, tmp_path)
    with FakeGitHub(REPO) as fake:
        fake.good_tokens.add(TOKEN)
        fake.permissions["maintainer"] = "write"
        fake.pulls[12] = {"number": 12, "head": {"sha": SHA_B}, "state": "open"}
        acknowledge(tmp_path / "ack", work, fake, SHA_B)
        git(work, "commit", "-q", "--allow-empty", "-m", "the acknowledged PR, squashed")
        merged = git(work, "rev-parse", "HEAD")
        fake.pulls[12] = {"number": 12, "head": {"sha": SHA_B}, "base": {"ref": "main"},
                          "state": "closed", "merged_at": "2026-01-07T00:00:00Z",
                          "merge_commit_sha": merged}
        logs += [one_night(tmp_path, work, i, rpm, fake)
                 for i, rpm in enumerate(VALUES[HEALTHY:], HEALTHY)]
    assert f"PR #12's acknowledgement of drain.req_per_min (maintainer: pinned memory is " \
        f"needed for correctness) now marks {merged[:12]}" in logs[6]
    assert "acknowledged" in logs[-1]  # detection's table: the change point's state
    assert "not promoted to baseline" in logs[6] and "not promoted" not in logs[-1]
    (_, baseline) = load_all(work / ".github" / "perf-gate-baselines")[0]
    assert 100 < baseline.figures["drain.req_per_min"].point < 135
    assert "PR 12, acknowledged by maintainer" in baseline.provenance.note


@pytest.mark.parametrize(("inputs", "code"), [
    ({"pr": "12", "sha": SHA_B, "check": "drain.req_per_min"}, 0),
    ({"pr": "12; true", "sha": SHA_B, "check": "drain.req_per_min"}, 2),
    ({"pr": "12", "sha": SHA_B[:12], "check": "drain.req_per_min"}, 2),
    ({"pr": "12", "sha": SHA_B, "check": "drain; rm -rf /"}, 2),
])
def test_the_acknowledgement_inputs_are_checked(tmp_path, inputs, code):
    proc, _ = run_step(ACK, "acknowledge", "Check the inputs", tmp_path,
                       event_name="workflow_dispatch", inputs=inputs)
    assert proc.returncode == code, proc.stdout + proc.stderr


@pytest.mark.parametrize(("actor", "kept"), [("maintainer", True), ("reader", False)])
def test_a_writers_acknowledgement_is_kept_in_the_history_branch(tmp_path, nightly, actor,
                                                                 kept):
    origin, work = nightly
    with FakeGitHub(REPO) as fake:
        fake.good_tokens.add(TOKEN)
        fake.permissions.update({"maintainer": "write", "reader": "read"})
        fake.pulls[12] = {"number": 12, "head": {"sha": SHA_B}}
        inputs = {"pr": "12", "sha": SHA_B, "check": "drain.req_per_min",
                  "reason": "correctness first; @someone see #1"}
        context = {"event_name": "workflow_dispatch", "cwd": work, "inputs": inputs,
                   "fake": fake}
        step = "Acknowledge (write access checked through the API)"
        for name in ("Fetch the history", step, "Push the history"):
            env = {"GH_TOKEN": "ghs_x", "LOGIN": actor}
            proc, _ = run_step(ACK, "acknowledge", name, tmp_path, extra_env=env, **context)
            if name == step and not kept:
                assert proc.returncode == 2
                assert "reader has read access" in proc.stderr
                return
            assert proc.returncode == 0, (name, proc.stdout + proc.stderr)
    git(work, "fetch", "-q", "origin", "perf-gate-data")
    db = tmp_path / "fetched.sqlite"
    db.write_bytes(subprocess.run(["git", "-C", str(work), "show", "FETCH_HEAD:history.sqlite"],
                                  capture_output=True, check=True).stdout)
    with opened(db) as store:
        (ack,) = store.acknowledgements()
    assert (ack.login, ack.pr, ack.head_sha, ack.permission) == ("maintainer", 12, SHA_B, "write")
    assert ack.reason == "correctness first; @someone see #1"
