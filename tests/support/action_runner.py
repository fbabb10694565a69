"""The GitHub runner as the tests model it.

A small interpreter reads action.yml, resolves the `${{ }}` expressions the action uses in its
`env:` blocks (support/expressions.py: inputs.*, steps.<id>.outputs.*, github.action_path,
github.token, runner.temp, and the operators GitHub has), runs each
`run:` script with `bash --noprofile --norc -eo pipefail` in order, with fresh GITHUB_OUTPUT
files per step and GITHUB_STEP_SUMMARY, GITHUB_ENV and GITHUB_EVENT_PATH set like a runner,
records `uses:` steps instead of running them, and skips steps after a failure unless their
`if:` says always(). Also: how a runner reads GITHUB_OUTPUT files and which printed lines it
takes as workflow commands.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gate.measure.results import save_results
from support.calibrations import store_for
from support.expressions import Evaluator
from support.factories import drain_results
from support.fake_github import TOKEN, FakeGitHub
from support.gitrepo import commit, git, init
from support.paths import REPO_ROOT

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def runner_commands(text: str) -> list[str]:
    """Lines a runner would execute as workflow commands (actions/runner, ActionCommand.cs):
    it splits on \\r, \\n and \\r\\n; TryParseV2 trims leading whitespace with .NET's
    TrimStart() (every Unicode space) and looks for `::`; the legacy TryParse finds `##[`
    anywhere in the line (IndexOf). Both compare culture-aware, which passes over format
    characters (U+200B, U+2060, U+FEFF): they are left out before looking."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    seen = ["".join(c for c in ln if unicodedata.category(c) != "Cf") for ln in lines]
    return [ln for ln, s in zip(lines, seen, strict=True)
            if s.lstrip().startswith("::") or "##[" in s]


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


def read_outputs(path: Path) -> dict[str, str]:
    """A GITHUB_OUTPUT file, as the runner reads it after the step: a CR inside a value stays
    a CR (no newline translation)."""
    with path.open(encoding="utf-8", newline="") as fh:
        return parse_output_file(fh.read())


class Runner:
    timeout_s = 300  # per step; the twin's measuring step runs real servers

    def __init__(self, workspace: Path, inputs: dict[str, str], env: dict[str, str]):
        self.action = yaml.safe_load((REPO_ROOT / "action.yml").read_text())
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

    def context(self) -> dict:
        return {
            "github": {"action_path": str(REPO_ROOT), "token": TOKEN},
            "inputs": self.inputs,
            "steps": {sid: {"outputs": outputs} for sid, outputs in self.steps.items()},
            "runner": {"temp": self.env.get("RUNNER_TEMP", "")},
        }

    def resolve(self, value: object) -> str:
        for m in EXPR.finditer(str(value)):
            for name in re.findall(r"inputs\.([\w-]+)", m.group(1)):
                assert name in self.inputs, f"undeclared input {name}"
        return Evaluator(self.context()).interpolate(str(value))

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
            timeout=self.timeout_s,
        )
        outputs = read_outputs(output)
        if sid:
            self.steps[sid] = outputs
        return StepRun(name, sid, "run", proc.returncode, outputs, proc.stdout, proc.stderr)


def vllm_repo(path: Path) -> None:
    """A vLLM-shaped checkout whose PR changes the bitmask staging in utils.py; origin/main is
    the base."""
    utils = "vllm/v1/structured_output/utils.py"
    body = "def apply_grammar_bitmask(bitmask, logits):\n    staged = np.full(shape, -1)\n"
    init(path)
    commit(path, "base", {utils: "import numpy as np\n\n\n" + body + "    return staged\n"})
    git(path, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(path, "checkout", "-q", "-b", "pr")
    commit(path, "pin the staging buffer", {utils: (
        "import numpy as np\nimport torch\n\n"
        "def apply_grammar_bitmask(bitmask, logits):\n"
        "    staged = torch.full(shape, -1, pin_memory=PIN_MEMORY)\n"
        "    logits.copy_(staged.to(logits.device, non_blocking=True))\n    return staged\n"
    )})


def action_workspace(tmp_path: Path) -> Path:
    """tmp_path/workspace, a vllm_repo checkout, and stored results in tmp_path/stored: base,
    regressed (drain about half as fast) and healthy (within noise of base)."""
    ws = tmp_path / "workspace"
    ws.mkdir()
    vllm_repo(ws)
    data = tmp_path / "stored"
    data.mkdir()
    save_results(drain_results([233.0, 232.0, 234.0], label="base"), data / "base.json")
    save_results(drain_results([121.0, 122.0, 120.0]), data / "regressed.json")
    save_results(drain_results([233.5, 231.5, 233.0]), data / "healthy.json")
    # the runner's calibration (gate calibrate): A/B verdicts need its spread between servers
    store_for(data / "noise", drain_results([233.0]), between=0.01, within=0.02)
    return ws


def runner_env(tmp_path: Path, fake: FakeGitHub, event_name: str, event: dict) -> dict[str, str]:
    (tmp_path / "runner").mkdir(exist_ok=True)
    event_path = tmp_path / "event.json"
    event_path.write_text(json.dumps(event))
    return {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        # `gate` on PATH runs this checkout's code, the code of the action under test
        "PYTHONPATH": str(REPO_ROOT),
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "LANG": "C.UTF-8",
        "RUNNER_TEMP": str(tmp_path / "runner"),
        "GITHUB_WORKSPACE": str(tmp_path / "workspace"),
        "GITHUB_ACTION_PATH": str(REPO_ROOT),
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
        "noise-dir": str(tmp_path / "stored" / "noise"),
        **extra,
    }


PR_EVENT = {"action": "synchronize", "number": 7, "pull_request": {"number": 7}}
