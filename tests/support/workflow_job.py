"""One job of a shipped workflow run as the runner lays it out: every step in order, `if:`
evaluated (support/expressions.py) with the job's status so far, `run:` steps in bash with
the workflow's, job's and step's `env:`, `uses: ./.gate` through the composite action itself
(support/action_runner.py) with the step's `with:` resolved, and the actions GitHub provides
played by the test: checkout (a callback that fills the folder, as the test's repository
wants, or fails the step where it has no such ref), setup-python (nothing: this
interpreter), upload/download-artifact (a folder per artifact name, shared by the jobs of one
run). A step may be skipped by name, and its outputs
given instead (the token jobs' hash-pinned install of the gate: the gate is on PATH here).

Used by the workflow tests against the local GitHub server and by the CPU twin of the PR
workflow (tests/e2e/test_pr_twin.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from support.action_runner import Runner, parse_output_file
from support.expressions import EXPR, Evaluator, evaluate_if
from support.fake_github import TOKEN

# (folder, the step's with:); False: the repository has no such ref, and the step fails as
# actions/checkout does
Checkout = Callable[[Path, dict[str, str]], bool | None]


@dataclass
class Step:
    name: str
    id: str | None
    kind: str  # run, uses, action, skipped
    outcome: str = "success"  # success, failure, skipped
    conclusion: str = "success"  # the outcome after continue-on-error
    outputs: dict[str, str] = field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""
    action: object | None = None  # the ActionRun of `uses: ./.gate`


@dataclass
class JobRun:
    job: str
    steps: list[Step]
    outputs: dict[str, str]

    @property
    def result(self) -> str:
        """What GitHub shows for the job: failure when a step failed (continue-on-error
        aside), else success."""
        return "failure" if any(s.conclusion == "failure" for s in self.steps) else "success"

    def step(self, name: str) -> Step:
        return next(s for s in self.steps if s.name == name or s.id == name)


@dataclass
class Run:
    """One workflow run: its event, inputs, the folder each job works in, its artifacts."""

    doc: dict
    root: Path
    env: dict[str, str]  # the runner's environment (PATH, HOME, GITHUB_API_URL, ...)
    event: dict = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)
    checkout: Checkout | None = None
    action_inputs: dict[str, str] = field(default_factory=dict)  # what this machine needs
    skip: set[str] = field(default_factory=set)
    jobs: dict[str, JobRun] = field(default_factory=dict)
    timeout_s: float = 900

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    def run(self, job: str) -> JobRun:
        spec = self.doc["jobs"][job]
        workspace = self.root / job
        if workspace.exists():
            shutil.rmtree(workspace)
        workspace.mkdir(parents=True)
        steps: list[Step] = []
        outputs: dict[str, Step] = {}
        for i, step in enumerate(spec["steps"]):
            name, sid = step.get("name", f"step {i}"), step.get("id")
            status = "failure" if any(s.conclusion == "failure" for s in steps) else "success"
            context = self._context(outputs)
            if not evaluate_if(step.get("if", "success()"), context, status) \
                    or name in self.skip:
                steps.append(Step(name, sid, "skipped", "skipped", "skipped"))
                continue
            done = self._step(step, name, sid, workspace, context, spec, i)
            done.conclusion = done.outcome
            if done.outcome == "failure" and step.get("continue-on-error"):
                done.conclusion = "success"
            steps.append(done)
            if sid:
                outputs[sid] = done
        job_outputs = {k: Evaluator(self._context(outputs)).interpolate(str(v))
                       for k, v in (spec.get("outputs") or {}).items()}
        self.jobs[job] = JobRun(job, steps, job_outputs)
        return self.jobs[job]

    def _context(self, steps: dict[str, Step]) -> dict:
        return {
            "github": {"token": TOKEN, "event": self.event, "run_id": self.env.get(
                "GITHUB_RUN_ID", "77"), "repository": self.env.get("GITHUB_REPOSITORY", ""),
                "event_name": self.env.get("GITHUB_EVENT_NAME", "")},
            "needs": {k: {"outputs": v.outputs, "result": v.result} for k, v in self.jobs.items()},
            "steps": {k: {"outputs": v.outputs, "outcome": v.outcome,
                          "conclusion": v.conclusion} for k, v in steps.items()},
            "inputs": self.inputs, "env": self.doc.get("env", {}), "vars": {},
        }

    def _step(self, step: dict, name: str, sid: str | None, workspace: Path, context: dict,
              job: dict, index: int) -> Step:
        with_ = {k: Evaluator(context).interpolate(str(v)) for k, v in
                 (step.get("with") or {}).items()}
        uses = str(step.get("uses", ""))
        if uses.startswith("actions/checkout@"):
            target = workspace / with_.get("path", ".")
            target.mkdir(parents=True, exist_ok=True)
            assert self.checkout is not None, f"{name}: the test gives no checkout"
            if self.checkout(target, with_) is False:
                return Step(name, sid, "uses", "failure", stderr=f"no ref {with_.get('ref')}")
            return Step(name, sid, "uses")
        if uses.startswith("actions/setup-python@"):
            return Step(name, sid, "uses")
        if uses.startswith("actions/upload-artifact@"):
            source = workspace / with_["path"]
            if source.exists():
                dest = self.artifacts / with_["name"]
                copy = shutil.copytree if source.is_dir() else shutil.copy
                dest.mkdir(parents=True, exist_ok=True)
                copy(source, dest / source.name if source.is_file() else dest,
                     **({"dirs_exist_ok": True} if source.is_dir() else {}))
            return Step(name, sid, "uses")
        if uses.startswith("actions/download-artifact@"):
            stored = self.artifacts / with_["name"]
            if not stored.is_dir():
                return Step(name, sid, "uses", "failure", stderr=f"no artifact {with_['name']}")
            shutil.copytree(stored, workspace / with_.get("path", "."), dirs_exist_ok=True)
            return Step(name, sid, "uses")
        if uses == "./.gate":
            return self._action(name, sid, workspace, with_, job, context)
        assert "run" in step, f"{name}: a step this runner cannot play ({uses})"
        return self._script(step, name, sid, workspace, context, job, index)

    def _env(self, job: dict, step: dict, context: dict) -> dict[str, str]:
        ev = Evaluator(context)
        return {**self.env,
                **{k: ev.interpolate(str(v)) for k, v in self.doc.get("env", {}).items()},
                **{k: ev.interpolate(str(v)) for k, v in (job.get("env") or {}).items()},
                **{k: ev.interpolate(str(v)) for k, v in (step.get("env") or {}).items()}}

    def _script(self, step: dict, name: str, sid: str | None, workspace: Path, context: dict,
                job: dict, index: int) -> Step:
        assert EXPR.search(step["run"]) is None, f"{name}: an expression inside run:"
        output = self.root / f"output-{id(step)}-{index}"
        output.write_text("")
        script = self.root / "step.sh"
        script.write_text(step["run"])
        env = {**self._env(job, step, context), "GITHUB_OUTPUT": str(output),
               "GITHUB_WORKSPACE": str(workspace)}
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                              cwd=workspace, env=env, capture_output=True, text=True,
                              timeout=self.timeout_s)
        return Step(name, sid, "run", "failure" if proc.returncode else "success",
                    outputs=parse_output_file(output.read_text()), stdout=proc.stdout,
                    stderr=proc.stderr)

    def _action(self, name: str, sid: str | None, workspace: Path, with_: dict[str, str],
                job: dict, context: dict) -> Step:
        temp = self.root / "runner-temp"
        if temp.exists():
            shutil.rmtree(temp)
        temp.mkdir()
        env = {**self._env(job, {}, context), "RUNNER_TEMP": str(temp),
               "GITHUB_WORKSPACE": str(workspace),
               "GITHUB_STEP_SUMMARY": str(self.root / f"summary-{os.getpid()}.md")}
        runner = Runner(workspace, {**with_, **self.action_inputs}, env)
        runner.timeout_s = self.timeout_s
        action = runner.run()
        return Step(name, sid, "action", "failure" if action.failed else "success",
                    outputs=action.outputs, stdout="\n".join(s.stdout for s in action.steps),
                    stderr="\n".join(s.stderr for s in action.steps), action=action)
