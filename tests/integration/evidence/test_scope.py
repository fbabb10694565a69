"""gate scope against real git repositories built in tmp_path: which model runner(s) and
backend(s) a PR's changed files call for, written as scope.json and as GITHUB_OUTPUT lines."""

from __future__ import annotations

import json

import pytest
from support.gitrepo import commit, git, init

from gate.cli import main as gate_cli_main
from gate.core.errors import EXIT_BAD_INPUT
from gate.evidence.scope import Scope, extract_scope
from gate.plan.spec import load_plan, pin_runner

BASE_TREE = {
    "vllm/v1/worker/gpu_model_runner.py": "class GPUModelRunner: ...\n",
    "vllm/v1/worker/gpu_input_batch.py": "class InputBatch: ...\n",
    "vllm/v1/worker/gpu/structured_outputs.py": "def apply_grammar_bitmask(): ...\n",
    "vllm/v1/worker/gpu/buffer_utils.py": "def async_copy_to_gpu(): ...\n",
    "vllm/v1/structured_output/utils.py": "def apply_grammar_bitmask(): ...\n",
    "vllm/v1/structured_output/__init__.py": "class StructuredOutputManager: ...\n",
    "vllm/v1/structured_output/backend_xgrammar.py": "class XgrammarBackend: ...\n",
    "vllm/v1/structured_output/backend_guidance.py": "class GuidanceBackend: ...\n",
    "vllm/v1/structured_output/backend_outlines.py": "class OutlinesBackend: ...\n",
    "vllm/v1/structured_output/backend_lm_format_enforcer.py": "class LMFEBackend: ...\n",
    "vllm/utils/torch_utils.py": "PIN_MEMORY = True\n",
    "vllm/v1/sample/sampler.py": "class Sampler: ...\n",
    "vllm/v1/core/sched/scheduler.py": "class Scheduler: ...\n",
    "requirements/common.txt": "xgrammar == 0.2.8\n",
    "docs/index.md": "# vLLM\n",
    "vllm/entrypoints/cli/serve.py": "def serve(): ...\n",
}


@pytest.fixture
def repo(tmp_path):
    path = init(tmp_path / "vllm")
    commit(path, "base", BASE_TREE)
    git(path, "checkout", "-q", "-b", "pr")
    return path


def pr(repo, files: dict[str, str]) -> None:
    commit(repo, "the PR", {p: BASE_TREE.get(p, "") + text for p, text in files.items()})


PR_PLAN = pin_runner(load_plan("a100-gemma4-26b-pr"), "v2")


@pytest.mark.parametrize(("changed", "runners", "backends"), [
    (["vllm/v1/worker/gpu/buffer_utils.py"], ["v2"], ["xgrammar"]),
    (["vllm/v1/worker/gpu/structured_outputs.py", "docs/index.md"], ["v2"], ["xgrammar"]),
    (["vllm/v1/worker/gpu_model_runner.py"], ["v1"], ["xgrammar"]),
    (["vllm/v1/worker/gpu_input_batch.py"], ["v1"], ["xgrammar"]),
    (["vllm/v1/structured_output/utils.py"], ["v1"], ["xgrammar"]),  # the seed's culprit
    (["vllm/v1/structured_output/utils.py", "vllm/v1/worker/gpu/buffer_utils.py"],
     ["v1", "v2"], ["xgrammar"]),  # PR 45424 touched both paths
    (["vllm/utils/torch_utils.py"], ["v1", "v2"], ["xgrammar"]),
    (["vllm/v1/structured_output/__init__.py"], ["v1", "v2"], ["xgrammar"]),
    (["vllm/v1/sample/sampler.py"], ["v1", "v2"], ["xgrammar"]),
    (["vllm/v1/core/sched/scheduler.py"], ["v1", "v2"], ["xgrammar"]),
    (["requirements/common.txt"], ["v1", "v2"], ["xgrammar"]),
    (["vllm/v1/structured_output/backend_guidance.py"], ["v1", "v2"], ["guidance"]),
    (["vllm/v1/structured_output/backend_outlines.py",
      "vllm/v1/structured_output/backend_lm_format_enforcer.py"],
     ["v1", "v2"], ["lm-format-enforcer", "outlines"]),
    (["vllm/v1/structured_output/backend_xgrammar.py", "vllm/utils/torch_utils.py"],
     ["v1", "v2"], ["xgrammar"]),
])
def test_changed_files_decide_the_runners_and_backends(repo, changed, runners, backends):
    pr(repo, {p: "# changed\n" for p in changed})
    scope = extract_scope(repo, "main", "pr", PR_PLAN)
    assert (scope.runners, scope.backends, scope.default_used) == (runners, backends, False)
    decided = {s.path for s in scope.paths}
    assert decided == {p for p in changed if p != "docs/index.md"}


def test_nothing_runner_specific_takes_the_plans_default(repo):
    pr(repo, {"docs/index.md": "more\n", "vllm/entrypoints/cli/serve.py": "# x\n"})
    scope = extract_scope(repo, "main", "pr", PR_PLAN)
    assert (scope.runners, scope.backends, scope.default_used) == (["v2"], ["xgrammar"], True)
    assert scope.files_changed == 2 and scope.paths == []
    nightly = extract_scope(repo, "main", "pr", load_plan("a100-gemma4-26b"))
    assert nightly.runners == ["v1"]  # the seed harness pins V1
    unpinned = extract_scope(repo, "main", "pr", pin_runner(PR_PLAN, "auto"))
    assert unpinned.runners == ["auto"]


def test_the_diff_is_from_the_merge_base_not_the_base_tip(repo):
    """A change on the base branch after the PR forked is not the PR's."""
    pr(repo, {"docs/index.md": "pr\n"})
    git(repo, "checkout", "-q", "main")
    commit(repo, "base moves on", {"vllm/v1/worker/gpu/buffer_utils.py": "changed on main\n"})
    scope = extract_scope(repo, "main", "pr", PR_PLAN)
    assert scope.default_used and scope.paths == []


def test_a_rename_counts_on_both_its_paths(repo):
    git(repo, "mv", "vllm/v1/worker/gpu_input_batch.py", "vllm/v1/worker/input_batch_v1.py")
    commit(repo, "rename")
    scope = extract_scope(repo, "main", "pr", PR_PLAN)
    assert scope.runners == ["v1"]
    assert [s.path for s in scope.paths] == ["vllm/v1/worker/gpu_input_batch.py"]


def test_cli_writes_scope_json_and_github_outputs(repo, tmp_path, monkeypatch, capsys):
    pr(repo, {"vllm/v1/structured_output/utils.py": "# pin\n",
              "vllm/v1/worker/gpu/buffer_utils.py": "# pin\n"})
    outputs = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(outputs))
    out = tmp_path / "scope.json"
    code = gate_cli_main(["scope", "--repo", str(repo), "--base", "main", "--head", "pr",
                               "--plan", "a100-gemma4-26b-pr", "--out", str(out)])
    assert code == 0
    scope = Scope.model_validate_json(out.read_text())
    assert scope.runners == ["v1", "v2"] and scope.plan == "a100-gemma4-26b-pr"
    printed = capsys.readouterr().out
    assert "gate scope: measure V1 and V2, backends xgrammar:" in printed
    assert "V1's grammar bitmask staging" in printed
    text = outputs.read_text()
    values = dict(_heredocs(text))
    assert json.loads(values["runners"]) == ["v1", "v2"]
    assert json.loads(values["backends"]) == ["xgrammar"]
    assert values["scope-path"] == str(out)


def test_cli_refuses_a_ref_that_does_not_exist(repo, tmp_path, capsys):
    code = gate_cli_main(["scope", "--repo", str(repo), "--base", "nope", "--head", "pr",
                               "--out", str(tmp_path / "s.json")])
    assert code == EXIT_BAD_INPUT
    assert "git ref 'nope' does not exist" in capsys.readouterr().err
    assert not (tmp_path / "s.json").exists()


def _heredocs(text: str):
    """NAME<<DELIM / value / DELIM blocks of a GITHUB_OUTPUT file."""
    lines = iter(text.splitlines())
    for line in lines:
        name, _, delimiter = line.partition("<<")
        value = []
        for inner in lines:
            if inner == delimiter:
                break
            value.append(inner)
        yield name, "\n".join(value)
