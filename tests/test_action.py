"""action.yml as the runner would run it.

A small interpreter reads action.yml, resolves the `${{ }}` expressions the action uses in its
`env:` blocks (inputs.*, steps.<id>.outputs.*, github.action_path, github.token), runs each
`run:` script with `bash --noprofile --norc -eo pipefail` in order, with fresh GITHUB_OUTPUT
files per step and GITHUB_STEP_SUMMARY, GITHUB_ENV and GITHUB_EVENT_PATH set like a runner,
records `uses:` steps instead of running them, and skips steps after a failure unless their
`if:` says always(). It runs on stored results (built with the library models; the real
measurement is covered by the end-to-end tests) with GITHUB_API_URL pointed at the fake
GitHub server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from compare_helpers import drain_results
from fake_github import FakeGitHub

from gate.results import save_results

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "ghs_ActionTestToken_987654321"
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class StepRun:
    name: str
    id: str | None
    kind: str  # run, uses, skipped
    returncode: int | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""
    uses: str | None = None
    with_: dict[str, str] = field(default_factory=dict)


@dataclass
class ActionRun:
    steps: list[StepRun]
    outputs: dict[str, str]
    summary: str

    @property
    def failed(self) -> bool:
        return any(s.kind == "run" and s.returncode for s in self.steps)

    def step(self, name_or_id: str) -> StepRun:
        return next(s for s in self.steps if name_or_id in (s.id, s.name))


def parse_output_file(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT: `name=value` lines and `name<<DELIM ... DELIM` blocks."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            end = lines.index(delim, i + 1)
            out[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
            continue
        if "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
        i += 1
    return out


class Runner:
    def __init__(self, workspace: Path, inputs: dict[str, str], env: dict[str, str]):
        self.action = yaml.safe_load((ROOT / "action.yml").read_text())
        self.workspace = workspace
        self.env = env
        self.steps: dict[str, dict[str, str]] = {}
        unknown = set(inputs) - set(self.action["inputs"])
        assert not unknown, f"inputs not declared by action.yml: {unknown}"
        self.inputs = {
            name: str(spec.get("default", "")) for name, spec in self.action["inputs"].items()
        }
        self.inputs = {k: self.resolve(v) for k, v in self.inputs.items()}
        self.inputs.update(inputs)

    def lookup(self, expr: str) -> str:
        if expr == "github.action_path":
            return str(ROOT)
        if expr == "github.token":
            return TOKEN
        if m := re.fullmatch(r"inputs\.([\w-]+)", expr):
            assert m.group(1) in self.inputs, f"undeclared input {m.group(1)}"
            return self.inputs[m.group(1)]
        if m := re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr):
            return self.steps.get(m.group(1), {}).get(m.group(2), "")
        if m := re.fullmatch(r"(inputs\.[\w-]+) == '([^']*)' && (inputs\.[\w-]+) \|\| ''", expr):
            # `COND && VALUE || ''`: GitHub's idiom for "VALUE only when COND"
            return self.lookup(m.group(3)) if self.lookup(m.group(1)) == m.group(2) else ""
        raise AssertionError(f"expression too complex for the test interpreter: {expr}")

    def resolve(self, value: object) -> str:
        return EXPR.sub(lambda m: self.lookup(m.group(1)), str(value))

    def run(self) -> ActionRun:
        done: list[StepRun] = []
        summary = Path(self.env["GITHUB_STEP_SUMMARY"])
        for i, step in enumerate(self.action["runs"]["steps"]):
            name, sid = step.get("name", f"step {i}"), step.get("id")
            condition = step.get("if")
            assert condition in (None, "always()"), f"unsupported if: {condition}"
            failed = any(s.kind == "run" and s.returncode for s in done)
            if failed and condition != "always()":
                done.append(StepRun(name, sid, "skipped"))
                continue
            if "uses" in step:
                with_ = {k: self.resolve(v) for k, v in (step.get("with") or {}).items()}
                done.append(StepRun(name, sid, "uses", uses=step["uses"], with_=with_))
                continue
            assert EXPR.search(step["run"]) is None, (
                f"step {name!r} has an expression inside run: (template injection)"
            )
            assert step.get("shell") == "bash"
            done.append(self.run_script(i, name, sid, step))
        outputs = {k: self.resolve(v["value"]) for k, v in self.action["outputs"].items()}
        return ActionRun(done, outputs, summary.read_text() if summary.exists() else "")

    def run_script(self, i: int, name: str, sid: str | None, step: dict) -> StepRun:
        tmp = Path(self.env["RUNNER_TEMP"])
        script = tmp / f"step{i}.sh"
        script.write_text(step["run"])
        output = tmp / f"output{i}"
        output.write_text("")
        env = {
            **self.env,
            "GITHUB_OUTPUT": str(output),
            **{k: self.resolve(v) for k, v in (step.get("env") or {}).items()},
        }
        cwd = self.workspace / self.resolve(step.get("working-directory", "."))
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        outputs = parse_output_file(output.read_text())
        if sid:
            self.steps[sid] = outputs
        return StepRun(name, sid, "run", proc.returncode, outputs, proc.stdout, proc.stderr)


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
    }
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    )
    return proc.stdout.strip()


def vllm_repo(path: Path) -> None:
    """A vLLM-shaped checkout whose PR changes the bitmask staging in utils.py."""
    utils = path / "vllm/v1/structured_output/utils.py"
    utils.parent.mkdir(parents=True)
    body = "def apply_grammar_bitmask(bitmask, logits):\n    staged = np.full(shape, -1)\n"
    utils.write_text("import numpy as np\n\n\n" + body + "    return staged\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    git(path, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(path, "checkout", "-q", "-b", "pr")
    utils.write_text(
        "import numpy as np\nimport torch\n\n"
        "def apply_grammar_bitmask(bitmask, logits):\n"
        "    staged = torch.full(shape, -1, pin_memory=PIN_MEMORY)\n"
        "    logits.copy_(staged.to(logits.device, non_blocking=True))\n    return staged\n"
    )
    git(path, "commit", "-q", "-am", "pin the staging buffer")


@pytest.fixture
def fake():
    with FakeGitHub() as server:
        server.good_tokens.add(TOKEN)
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    vllm_repo(ws)
    data = tmp_path / "stored"
    data.mkdir()
    save_results(drain_results([233.0, 232.0, 234.0], label="base"), data / "base.json")
    save_results(drain_results([121.0, 122.0, 120.0]), data / "regressed.json")
    save_results(drain_results([233.5, 231.5, 233.0]), data / "healthy.json")
    return ws


def runner_env(tmp_path: Path, fake: FakeGitHub, event_name: str, event: dict) -> dict[str, str]:
    (tmp_path / "runner").mkdir(exist_ok=True)
    event_path = tmp_path / "event.json"
    event_path.write_text(json.dumps(event))
    return {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        # `gate` on PATH runs this checkout's code, the code of the action under test
        "PYTHONPATH": str(ROOT),
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "LANG": "C.UTF-8",
        "RUNNER_TEMP": str(tmp_path / "runner"),
        "GITHUB_WORKSPACE": str(tmp_path / "workspace"),
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_REPOSITORY": fake.repository,
        "GITHUB_API_URL": fake.url,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_BASE_REF": "main" if event_name == "pull_request" else "",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_ENV": str(tmp_path / "github_env"),
        "GITHUB_SHA": "0" * 40,
        "GITHUB_RUN_ID": "4242",
    }


def stored(tmp_path: Path, name: str) -> str:
    return str(tmp_path / "stored" / f"{name}.json")


def ab_inputs(tmp_path: Path, head: str, **extra: str) -> dict[str, str]:
    return {
        "mode": "ab",
        "results": stored(tmp_path, head),
        "base-results": stored(tmp_path, "base"),
        "install-mode": "preinstalled",
        "install-gate": "false",
        "vllm-src": ".",
        **extra,
    }


PR_EVENT = {"action": "synchronize", "number": 7, "pull_request": {"number": 7}}


def test_regression_on_a_pull_request_comments_annotates_and_fails(tmp_path, fake, workspace):
    env = runner_env(tmp_path, fake, "pull_request", PR_EVENT)
    result = Runner(workspace, ab_inputs(tmp_path, "regressed"), env).run()

    kinds = [(s.name, s.kind) for s in result.steps]
    assert [k for _, k in kinds] == ["run"] * 7 + ["uses", "run"], kinds
    for step in result.steps[:7]:
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


def test_no_markdown_or_json_is_built_in_shell_or_inline_python():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    for step in action["runs"]["steps"]:
        script = step.get("run", "")
        assert "printf" not in script, step["name"]
        assert not re.search(r"python3?\s+-(c\b|\s|$)", script), step["name"]
        assert not re.search(r"<<-?\s*['\"]?\w", script), step["name"]  # no heredoc (<<< is ok)
        assert not re.search(r"^\s*echo\s+['\"][{#*|-]", script, re.M), step["name"]


def big_change(repo: Path) -> None:
    """A PR that also changes every tenth line of a 4,000-line watched file: ~400 hunks, far
    more than a comment holds."""
    path = repo / "vllm/v1/sample/huge.py"
    path.parent.mkdir(parents=True)
    path.write_text("".join(f"value_{i} = {i}\n" for i in range(4000)))
    git(repo, "checkout", "-q", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "huge file")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(repo, "checkout", "-q", "pr")
    git(repo, "rebase", "-q", "main")
    lines = [f"value_{i} = {i * 2}  # ```` @someone <img src=x>\n" if i % 10 == 0
             else f"value_{i} = {i}\n" for i in range(4000)]
    path.write_text("".join(lines))
    git(repo, "commit", "-q", "-am", "change every tenth line")


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


def test_interpreter_reads_heredoc_outputs():
    text = "a=1\nb<<ghadelimiter_x\nline1\nline2\nghadelimiter_x\nc=x=y\n"
    assert parse_output_file(text) == {"a": "1", "b": "line1\nline2", "c": "x=y"}


def test_verdict_error_command_writes_once_and_exits_4(tmp_path, capsys):
    from gate.cli import main

    out = tmp_path / "verdict.json"
    assert main(["verdict", "--error", "head results missing", "--mode", "ab", "--out",
                 str(out)]) == 4
    written = json.loads(out.read_text())
    assert written["outcome"] == "error" and written["mode"] == "ab"
    assert written["headline"] == "ERROR: head results missing"
    assert written["errors"] == ["head results missing"]
    assert main(["verdict", "--error", "again", "--out", str(out)]) == 2
    assert "never replaces a verdict" in capsys.readouterr().err
    assert json.loads(out.read_text()) == written
