"""action.yml as the runner would run it (support/action_runner.py interprets it), on stored
results built with the library models (the real measurement is covered by the end-to-end
tests), with GITHUB_API_URL pointed at the fake GitHub server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.action_runner import PR_EVENT, Runner, ab_inputs, runner_env, stored
from support.factories import drain_results
from support.fake_github import TOKEN
from support.gitrepo import commit, git

from gate.history.model import Acknowledgement
from gate.history.store import RunMeta, opened


def test_regression_on_a_pull_request_comments_annotates_and_fails(tmp_path, fake, workspace):
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    result = Runner(workspace, ab_inputs(tmp_path, "regressed"), env).run()

    kinds = [(s.name, s.kind) for s in result.steps]
    assert [k for _, k in kinds] == ["run"] * 11 + ["uses", "run"], kinds
    for step in result.steps[:8]:
        assert step.returncode == 0, f"{step.name}: {step.stdout}\n{step.stderr}"
    final = result.steps[-1]
    assert final.returncode == 1  # fail-on: fail,error
    assert "::error title=Perf gate fail::FAIL" in final.stdout

    assert result.outputs["verdict"] == "fail"
    assert result.outputs["exit-code"] == "1"
    assert result.outputs["results"] == stored(tmp_path, "regressed")
    assert Path(result.outputs["verdict-path"]).name == "verdict.json"
    report = Path(result.outputs["report-path"]).read_text()
    assert "FAIL" in report.splitlines()[0]

    (comment,) = fake.comments[7]
    assert "<!-- vllm-structured-output-gate:default -->" in comment["body"]
    assert "drain req/min" in comment["body"]
    assert "FAIL" in result.summary

    publish = result.step("publish")
    assert "::warning file=vllm/v1/structured_output/utils.py,line=" in publish.stdout
    hunks = json.loads((workspace / "gate-out" / "hunks.json").read_text())
    assert hunks["hunks"][0]["path"] == "vllm/v1/structured_output/utils.py"

    upload = result.step("Upload the results")
    assert upload.uses.startswith("actions/upload-artifact@")
    assert upload.with_["path"] == str(workspace / "gate-out")
    assert upload.with_["name"] == "perf-gate"

    everything = [s.stdout + s.stderr for s in result.steps] + [result.summary]
    everything += [
        p.read_text(errors="replace")
        for p in tmp_path.rglob("*")
        if p.is_file() and ".git" not in p.parts and p.suffix != ".sh"
    ]
    assert all(TOKEN not in text for text in everything)


def test_workflow_dispatch_pass_comments_on_the_input_pr(tmp_path, fake, workspace):
    event = {"inputs": {"pr": "42", "plan": "a100-gemma4-26b"}}
    env = runner_env(tmp_path, fake, "workflow_dispatch", event)
    result = Runner(workspace, ab_inputs(tmp_path, "healthy", **{"marker-id": "rerun"}), env).run()
    assert not result.failed, [(s.name, s.returncode, s.stderr) for s in result.steps]
    assert result.outputs["verdict"] == "pass"
    (comment,) = fake.comments[42]
    assert "<!-- vllm-structured-output-gate:rerun -->" in comment["body"]
    assert "::warning file=" not in result.step("publish").stdout


def test_fail_on_error_only_lets_a_fail_pass(tmp_path, fake, workspace):
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    inputs = ab_inputs(tmp_path, "regressed", **{"fail-on": "error", "comment": "false"})
    result = Runner(workspace, inputs, env).run()
    assert result.outputs["verdict"] == "fail"
    assert result.steps[-1].returncode == 0
    assert "not in fail-on" in result.steps[-1].stdout
    assert 7 not in fake.comments  # comment: false
    handover = json.loads((workspace / "gate-out" / "gate-comment.json").read_text())
    assert handover["pr"] == 7 and handover["runs"][0]["verdict"]["outcome"] == "fail"
    assert "body" not in handover  # the poster renders the comment itself
    assert result.outputs["comment-file"] == str(workspace / "gate-out" / "gate-comment.json")


def test_fork_token_writes_the_comment_file_and_keeps_the_verdict(tmp_path, fake, workspace):
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    inputs = ab_inputs(tmp_path, "regressed", **{"github-token": "fork-token"})
    result = Runner(workspace, inputs, env).run()
    assert result.outputs["verdict"] == "fail"
    assert result.steps[-1].returncode == 1
    assert fake.requests_to("POST") and 7 not in fake.comments
    assert (workspace / "gate-out" / "gate-comment.json").exists()


def test_missing_results_is_an_error_verdict_and_a_short_report(tmp_path, fake, workspace):
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    inputs = ab_inputs(tmp_path, "regressed", results=str(tmp_path / "nope.json"))
    result = Runner(workspace, inputs, env).run()
    assert result.outputs["verdict"] == "error"
    assert result.steps[-1].returncode == 4
    verdict = json.loads((workspace / "gate-out" / "verdict.json").read_text())
    assert verdict["outcome"] == "error" and verdict["mode"] == "ab"
    assert verdict["headline"].startswith("ERROR: no verdict (measurement exit 0, compare exit 0)")
    report = (workspace / "gate-out" / "report.md").read_text()
    assert report.startswith("### 💥 ERROR: no verdict")
    assert "No readable results: this report shows the verdict alone" in report
    body = fake.comments[7][0]["body"]
    assert "### 💥 ERROR: no verdict" in body and "#### Changes in watched paths" in body


def test_unreadable_results_fall_back_to_the_verdict_alone(tmp_path, fake, workspace):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    result = Runner(workspace, ab_inputs(tmp_path, "regressed", results=str(broken)), env).run()
    assert result.outputs["verdict"] == "error"
    assert all(s.returncode == 0 for s in result.steps[:7]), [s.stderr for s in result.steps]
    assert "verdict alone" in (workspace / "gate-out" / "report.md").read_text()
    assert "### 💥 ERROR" in fake.comments[7][0]["body"]


def big_change(repo: Path) -> None:
    """A PR that also changes every tenth line of a 4,000-line watched file: ~400 hunks, far
    more than a comment holds."""
    huge = "vllm/v1/sample/huge.py"
    git(repo, "checkout", "-q", "main")
    commit(repo, "huge file", {huge: "".join(f"value_{i} = {i}\n" for i in range(4000))})
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(repo, "checkout", "-q", "pr")
    git(repo, "rebase", "-q", "main")
    lines = [f"value_{i} = {i * 2}  # ```` @someone <img src=x>\n" if i % 10 == 0
             else f"value_{i} = {i}\n" for i in range(4000)]
    commit(repo, "change every tenth line", {huge: "".join(lines)})


def test_a_huge_diff_gives_a_comment_within_the_limit_never_cut(tmp_path, fake, workspace):
    big_change(workspace)
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    result = Runner(workspace, ab_inputs(tmp_path, "regressed"), env).run()
    assert result.outputs["verdict"] == "fail"
    hunks = json.loads((workspace / "gate-out" / "hunks.json").read_text())["hunks"]
    assert len(hunks) > 300
    (comment,) = fake.comments[7]
    body = comment["body"]
    assert len(body) <= 65_536
    assert f"of {len(hunks)} hunk(s) were left out" in body
    first_hunk = body.split("#### Changes in watched paths")[1].split("<details")[1]
    assert "vllm/v1/structured_output/utils.py" in first_hunk  # ranked first
    assert body.count("<details") == body.count("</details>")
    assert body.rstrip().endswith("</sub>")  # the footer is there: nothing cut off the end
    assert "report trimmed" not in body
    report = (workspace / "gate-out" / "report.md").read_text()
    assert len(report) <= 65_536 and "were left out" in report


NIGHTS = [233.0, 231.0, 234.0, 232.0, 233.5, 232.5]


def default_branch_history(tmp_path: Path, ack_head: str | None) -> Path:
    """Six nights of the stored runs' plan on their runner class, and a maintainer's
    acknowledgement of the drain check for PR 7 at `ack_head`."""
    path = tmp_path / "perf-gate-data" / "history.sqlite"
    with opened(path, create=True) as store:
        for i, rpm in enumerate(NIGHTS):
            store.add_run(drain_results([rpm, rpm, rpm]), RunMeta(
                commit=f"{i + 1:040x}", branch="main", commit_time=f"2026-01-0{i + 1}T03:00:00Z"))
        if ack_head:
            store.acknowledge(Acknowledgement(
                repository="octo/vllm", pr=7, head_sha=ack_head, check="drain.req_per_min",
                reason="pinned memory for correctness", login="maintainer", permission="write",
                created_at="2026-01-07T00:00:00+00:00"))
    return path


@pytest.mark.parametrize("acknowledged", [True, False], ids=["this-head", "another-head"])
def test_the_acknowledgement_of_this_head_turns_the_check_neutral(tmp_path, fake, workspace,
                                                                  acknowledged):
    head = git(workspace, "rev-parse", "HEAD")
    history = default_branch_history(tmp_path, head if acknowledged else "f" * 40)
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    inputs = ab_inputs(tmp_path, "regressed", history=str(history), pr="7")
    result = Runner(workspace, inputs, env).run()
    assert result.step("history").returncode == 0, result.step("history").stderr
    body = fake.comments[7][0]["body"]
    verdict = json.loads((workspace / "gate-out" / "verdict.json").read_text())
    drain = next(c for c in verdict["checks"] if c["name"] == "drain.req_per_min")
    if acknowledged:
        assert result.outputs["verdict"] == "pass" and result.steps[-1].returncode == 0
        assert drain["acknowledged"]["login"] == "maintainer"
        assert "➖ neutral: acknowledged fail" in body
    else:
        assert result.outputs["verdict"] == "fail" and result.steps[-1].returncode == 1
        assert drain["acknowledged"] is None and "neutral" not in body
        assert any("not at this head" in n for n in verdict["notes"])
    assert "Main, nightly" in body  # the check's nights on the default branch, as a sparkline


def test_the_comment_file_carries_the_nights_on_the_default_branch(tmp_path, fake, workspace):
    history = default_branch_history(tmp_path, None)
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    inputs = ab_inputs(tmp_path, "regressed", history=str(history), pr="7", comment="false")
    result = Runner(workspace, inputs, env).run()
    assert result.outputs["verdict"] == "fail"
    handover = json.loads((workspace / "gate-out" / "gate-comment.json").read_text())
    assert handover["schema_version"] == 3
    assert handover["runs"][0]["history"]["drain.req_per_min"] == pytest.approx(NIGHTS)
    assert "Main, nightly" in (workspace / "gate-out" / "report.md").read_text()


@pytest.mark.parametrize("kind", ["missing", "broken"])
def test_no_history_or_a_broken_one_leaves_the_verdict_as_measured(tmp_path, fake, workspace,
                                                                   kind):
    history = tmp_path / "history.sqlite"
    if kind == "broken":
        history.write_text("not a database")
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    inputs = ab_inputs(tmp_path, "regressed", history=str(history), pr="7")
    result = Runner(workspace, inputs, env).run()
    assert result.outputs["verdict"] == "fail" and result.steps[-1].returncode == 1
    step = result.step("history")
    assert step.returncode == 0 and "history" not in step.outputs
    if kind == "broken":
        assert "::warning title=Perf gate::the history at" in step.stdout
    assert "Main, nightly" not in fake.comments[7][0]["body"]
