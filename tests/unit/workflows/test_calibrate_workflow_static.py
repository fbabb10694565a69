"""workflows/gate-calibrate.yml, read from the file: when it runs, where it measures, and that
the job that writes to the repository measures nothing (the trust rules every workflow meets
are checked for it in test_workflows_trust_static.py)."""

from __future__ import annotations

from support.workflows import load, needs, runs, runs_on_self_hosted, step, triggers

DOC = load("gate-calibrate.yml")
# a schedule runs on the default branch only and carries no `repository`; a dispatch must be on it
DEFAULT_BRANCH_ONLY = ("github.event_name == 'schedule' || "
                       "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)")


def test_it_runs_on_a_schedule_or_on_demand_only():
    on = triggers(DOC)
    assert set(on) == {"schedule", "workflow_dispatch"}
    assert on["workflow_dispatch"]["inputs"]["blocks"]["type"] == "string"
    assert DOC["permissions"] == {"contents": "read"}


def test_the_measuring_job_calibrates_the_default_branch_read_only():
    job = DOC["jobs"]["measure"]
    assert runs_on_self_hosted(job) and job["if"] == DEFAULT_BRANCH_ONLY
    assert job["permissions"] == {"contents": "read"}
    fresh = step(DOC, "measure", "Check that the runner is fresh and isolated")
    assert ".gate/scripts/check_runner.py" in fresh["run"]  # before anything is installed
    calibrate = step(DOC, "measure", "Install vLLM, calibrate")
    assert '"$gate" calibrate --plan "$PLAN"' in calibrate["run"]
    assert "--noise-dir calibration" in calibrate["run"]  # only its own run, to the artifact
    upload = step(DOC, "measure", "Upload the calibration run")
    assert upload["with"]["path"] == "calibration/"


def test_the_storing_job_merges_and_opens_a_pr_without_measured_code():
    job = DOC["jobs"]["store"]
    assert needs(job) == ["measure"] and not runs_on_self_hosted(job)
    # the job's own token reads; the push and the PR go with the perf-gate app's token
    assert job["permissions"] == {"contents": "read"}
    assert runs(job, 'gate calibrate --merge "$runs" --noise-dir "$BASELINES_PATH/noise"')
    assert not runs(job, "install-vllm") and not runs(job, "gate ab")
    push = step(DOC, "store", "Push a branch and open a PR")
    assert "gh pr create" in push["run"] and "GIT_CONFIG_VALUE_0" in push["run"]
    assert push["env"]["GH_TOKEN"] == "${{ steps.app.outputs.token }}"
