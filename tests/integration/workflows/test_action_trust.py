"""action.yml's own controls, run the way the runner runs them (support/action_runner.py) with
a stand-in `gate` where the code under test would run (issue 16):

- item 10: a job that ran the code under test hands no token to a later step: with the
  default `comment: auto` the comment goes to the hand-over file, `comment: true` is refused
  before anything runs, and a PR that replaces the `gate` program during its install finds no
  token to steal;
- item 8: a verdict headline with a carriage return (from untrusted text) prints exactly one
  workflow command in the "Apply fail-on" step;
- item 4: with `runner-marker`, a runner that cannot prove it is fresh stops the job before
  the code under test is installed; round three (review M2, L5): the check is the action's
  first step, run from the action's own files with the system's Python before the gate is
  installed, and an empty `runner-marker` on a self-hosted runner is refused, not skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from support import factories as f
from support.action_runner import (
    PR_EVENT,
    TOKEN,
    Runner,
    ab_inputs,
    action_workspace,
    runner_commands,
    runner_env,
)
from support.fake_github import FakeGitHub

from gate.judge.verdict import Outcome

REAL_GATE = shutil.which("gate", path=str(Path(sys.executable).parent))
# The stand-in `gate` measures nothing (its `ab` copies stored results; nothing here may start
# a server) and, while "installing the PR", does what the PR's code could: replace the gate
# program that later steps run with one that keeps whatever token it is given.
STAND_IN = f"""#!/usr/bin/env bash
echo "$1" >> "$CALLS"
out=""; prev=""
for arg in "$@"; do [ "$prev" = --out ] && out="$arg"; prev="$arg"; done
case "$1" in
  install-vllm)
    cp "$0" "$0.orig"
    cat > "$0" <<'EVIL'
#!/usr/bin/env bash
echo "token=$GITHUB_TOKEN" >> "$LOOT"
exec "$0.orig" "$@"
EVIL
    exit 0 ;;
  doctor) exit 0 ;;
  ab)
    mkdir -p "$out/head" "$out/base"
    cp "$STORED/regressed.json" "$out/head/results.json"
    cp "$STORED/base.json" "$out/base/results.json"
    exit 1 ;;
  run|calibrate|profile|tiny-model) echo "the stand-in starts no server" >&2; exit 9 ;;
esac
exec {REAL_GATE} "$@"
"""


@pytest.fixture
def fake():
    with FakeGitHub() as server:
        server.good_tokens.add(TOKEN)
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return action_workspace(tmp_path)


def measuring_run(tmp_path: Path, fake: FakeGitHub, workspace: Path, **inputs: str):
    """The action measuring in this job (no precomputed results): install, doctor, gate ab."""
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "gate").write_text(STAND_IN)
    (shims / "gate").chmod(0o755)
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    env.update({"PATH": f"{shims}{os.pathsep}{env['PATH']}", "CALLS": str(tmp_path / "calls"),
                "LOOT": str(tmp_path / "loot"), "STORED": str(tmp_path / "stored")})
    given = {"mode": "ab", "install-mode": "preinstalled", "python": sys.executable,
             "base-python": sys.executable, "install-gate": "false",
             "noise-dir": str(tmp_path / "stored" / "noise"), **inputs}
    return Runner(workspace, given, env).run()


def calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text().split() if path.exists() else []


# == item 10 =============================================================================
def test_a_job_that_ran_pr_code_hands_the_token_to_nothing_by_default(tmp_path, fake, workspace):
    result = measuring_run(tmp_path, fake, workspace)
    made = calls(tmp_path)
    assert made[:4] == ["--version", "install-vllm", "doctor", "ab"]  # the PR's code ran
    assert result.outputs["verdict"] == "fail"
    loot = (tmp_path / "loot").read_text()  # the replaced gate ran the later steps...
    assert "token=" in loot and TOKEN not in loot  # ...and was given no token
    assert not fake.requests  # nothing reached GitHub from this job
    handover = json.loads((workspace / "gate-out" / "gate-comment.json").read_text())
    assert handover["pr"] == 7 and handover["runs"][0]["verdict"]["outcome"] == "fail"


def test_comment_true_in_a_measuring_job_is_refused_before_anything_runs(
    tmp_path, fake, workspace
):
    result = measuring_run(tmp_path, fake, workspace, comment="true")
    setup = result.step("setup")
    assert setup.returncode == 2
    assert "comment: true would hand the token to a step after the PR's code ran" in setup.stdout
    assert calls(tmp_path) == []  # no install, no measurement
    assert [s.id for s in result.steps[:2]] == ["isolate", "setup"]
    assert [s.kind for s in result.steps[2:-2]] == ["skipped"] * (len(result.steps) - 4)
    assert not fake.requests


def test_rejudging_an_artifact_still_comments(tmp_path, fake, workspace):
    """No code under test runs when the results are given: `auto` comments from the job."""
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    result = Runner(workspace, ab_inputs(tmp_path, "regressed"), env).run()
    assert result.step("setup").outputs["comment"] == "true"
    assert len(fake.comments[7]) == 1


# == item 8 ==============================================================================
def test_a_carriage_return_in_the_headline_starts_no_workflow_command(tmp_path, fake, workspace):
    """The measuring job's gate ab wrote verdict.json (PR code could shape it): its headline
    ends a line with CR and starts another that the runner would run as a command."""
    out = workspace / "gate-out"
    out.mkdir()
    forged = "FAIL: drain -48%\r::add-mask::ghs_x\r::error title=Perf gate pass::all good"
    verdict = f.verdict(Outcome.FAIL, headline=forged, mode="ab")
    (out / "verdict.json").write_text(verdict.model_dump_json())
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    result = Runner(workspace, ab_inputs(tmp_path, "regressed", comment="false"), env).run()
    final = result.steps[-1]
    assert final.returncode == 1
    (command,) = runner_commands(final.stdout)
    assert command == ("::error title=Perf gate fail::FAIL: drain -48%25%0D::add-mask::ghs_x"
                       "%0D::error title=Perf gate pass::all good")
    for s in result.steps:  # no step printed a command of the forged text's making
        for line in runner_commands(s.stdout + s.stderr):
            assert not line.startswith(("::add-mask", "::error title=Perf gate pass")), line


# == item 4 ==============================================================================
def test_a_runner_that_is_not_proven_fresh_stops_before_the_pr_code_runs(
    tmp_path, fake, workspace
):
    hub = tmp_path / "hub"
    hub.mkdir()
    result = measuring_run(tmp_path, fake, workspace, comment="false",
                           **{"runner-marker": str(tmp_path / "no-marker.json"),
                              "model-cache": str(hub)})
    isolate = result.step("isolate")
    assert result.steps[0] is isolate and isolate.returncode == 1
    assert "gate trust: refused:" in isolate.stderr  # no marker (and, as root, root itself)
    assert "not fit to run a job's code" in isolate.stderr
    assert calls(tmp_path) == []  # the check is the action's own script: no `gate` ran yet
    assert result.step("setup").kind == result.step("install").kind == "skipped"
    assert result.step("Upload the results").kind == "uses"  # always(): the artifact still goes


def test_without_a_marker_input_the_check_says_so(tmp_path, fake, workspace):
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    result = Runner(workspace, ab_inputs(tmp_path, "healthy"), env).run()
    assert result.step("isolate").returncode == 0
    assert "freshness is not checked" in result.step("isolate").stdout


@pytest.mark.parametrize(("marker", "code", "said"), [
    ("", 2, "runner-marker is empty on a self-hosted runner"),
    ("none", 0, "runner-marker is none: the runner's freshness is not checked"),
])
def test_an_empty_marker_on_a_self_hosted_runner_is_refused(tmp_path, fake, workspace, marker,
                                                            code, said):
    """L5: a workflow that forgets the marker must not run unchecked by default; skipping
    the check takes the explicit word `none`."""
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    env["RUNNER_ENVIRONMENT"] = "self-hosted"
    result = Runner(workspace, ab_inputs(tmp_path, "healthy", **{"runner-marker": marker}),
                    env).run()
    isolate = result.step("isolate")
    assert isolate.returncode == code and said in isolate.stdout
    assert (result.step("setup").kind == "skipped") == bool(code)
