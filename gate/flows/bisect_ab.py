"""How `gate bisect` measures a build against the good (or parent) build: the one call into
gate.flows.ab, the repeats an inconclusive step gets within its budget, and the reference
build's server kept up across steps (docs/bisect.md#a-step).

A step is decided when its A/B passes or fails. An inconclusive A/B is run again while the
step's budget holds another attempt of the same length (at most `max_attempts`); each attempt
is a whole A/B at the plan's confidence, so two attempts at most double the chance of a wrong
decision. What stays inconclusive, and a build whose server cannot be measured, is skipped by
the search. When the plan keeps both servers up (`ab.servers: persistent`), the reference
build's server is started once and every step's A/B reaches it by URL, so a bisect of n steps
starts n + 1 servers, not 2n.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from gate.core.errors import MeasurementError
from gate.core.files import write_atomic
from gate.core.progress import Progress
from gate.evidence.bisect_record import Measured
from gate.evidence.bisection import deciding_effect
from gate.flows import ab
from gate.judge.compare import compare_results
from gate.judge.noise import noise_for
from gate.judge.verdict import Outcome, Verdict
from gate.measure.results import Results
from gate.measure.server import VllmServer
from gate.plan.spec import Plan
from gate.plan.thresholds import Thresholds
from gate.runner import tiny_model


@dataclass(frozen=True)
class BuildUnderTest:
    """A build as an A/B side: interpreter and server environment, or a running server."""

    python: str
    env: dict[str, str] = field(default_factory=dict)
    base_url: str | None = None


@dataclass
class ABSettings:
    """What every A/B of one bisect shares."""

    plan: Plan
    thresholds: Thresholds
    noise_dir: Path | None
    profiling: ab.Profiling
    cache_dir: Path
    progress: Progress
    step_budget_minutes: float | None = None
    max_attempts: int = 2


@dataclass(frozen=True)
class ABRun:
    verdict: Verdict
    profile_diff: Path | None
    seconds: float
    base_broken: list[str]


# The A/B a step runs: (settings, reference build, build under test, folder) -> its run.
RunAB = Callable[[ABSettings, BuildUnderTest, BuildUnderTest, Path], ABRun]


def run_ab(settings: ABSettings, base: BuildUnderTest, head: BuildUnderTest, out: Path
           ) -> ABRun:
    """One `gate ab` of `head` against `base` into `out` (verdict.json, base/, head/,
    profile-diff/): the only call into gate.flows.ab."""
    def judge(head_results: Results, base_results: Results | None) -> Verdict:
        noise = noise_for(settings.noise_dir, settings.plan.name, head_results.plan_hash,
                          head_results.fingerprint.hardware_key)
        return compare_results(head_results, base_results, None, settings.thresholds,
                               noise=noise, head_path=str(out / "head" / "results.json"),
                               base_path=str(out / "base" / "results.json"))

    started = time.monotonic()
    result = ab.ab(settings.plan, ab.Build("base", base.python, base.env, base.base_url),
                   ab.Build("head", head.python, head.env), out, judge, settings.progress,
                   settings.cache_dir, settings.profiling)
    write_atomic(out / "verdict.json", result.verdict.model_dump_json(indent=1))
    diff = out / "profile-diff" if result.profile is not None else None
    broken = [e for e in result.verdict.errors if e.startswith("base")]
    return ABRun(result.verdict, diff, time.monotonic() - started, broken)


class ReferenceBroken(MeasurementError):
    """The good (or parent) build could not be measured: no step can be judged."""


def decide(settings: ABSettings, base: BuildUnderTest, head: BuildUnderTest, folder: Path,
           run: RunAB = run_ab) -> Measured:
    """A/B `head` against `base` until decided, within the step's budget and attempts."""
    runs: list[ABRun] = []
    started = time.monotonic()
    while True:
        plan = _plan_within(settings, time.monotonic() - started)
        attempt = run(replace(settings, plan=plan), base, head, folder / f"ab{len(runs) + 1}")
        runs.append(attempt)
        if attempt.base_broken:
            raise ReferenceBroken("the reference build broke: " + attempt.base_broken[0])
        if not _again(settings, runs, time.monotonic() - started):
            break
    last = runs[-1]
    return Measured(
        outcome=last.verdict.outcome, effect=deciding_effect(last.verdict),
        rounds=sum(r.verdict.rounds or 0 for r in runs), attempts=len(runs),
        seconds=time.monotonic() - started, folder=str(folder / f"ab{len(runs)}"),
        profile_diff=str(last.profile_diff) if last.profile_diff else None,
        reason=_reason(last.verdict))


def _plan_within(settings: ABSettings, spent_s: float) -> Plan:
    """The plan with its A/B budget cut to what is left of the step's."""
    if settings.step_budget_minutes is None:
        return settings.plan
    left = max(settings.step_budget_minutes - spent_s / 60, 0.1)
    budget = settings.plan.ab.budget_minutes
    ab_spec = settings.plan.ab.model_copy(update={
        "budget_minutes": left if budget is None else min(budget, left)})
    return settings.plan.model_copy(update={"ab": ab_spec})


def _again(settings: ABSettings, runs: list[ABRun], spent_s: float) -> bool:
    if runs[-1].verdict.outcome != Outcome.INCONCLUSIVE or len(runs) >= settings.max_attempts:
        return False
    if settings.step_budget_minutes is None:
        return True
    return spent_s + runs[-1].seconds <= settings.step_budget_minutes * 60


def _reason(verdict: Verdict) -> str:
    if verdict.outcome == Outcome.INCONCLUSIVE:
        return "inconclusive: " + verdict.headline
    if verdict.outcome == Outcome.ERROR:
        return "could not be measured: " + (verdict.errors[0] if verdict.errors
                                              else verdict.headline)
    return ""


class ReferenceServer:
    """The reference build's server, shared by the steps' A/Bs when the plan keeps both
    servers up; otherwise each A/B starts its own (`side` is then the build itself)."""

    def __init__(self, build: BuildUnderTest, server: VllmServer | None = None):
        self.build, self.server = build, server

    @property
    def side(self) -> BuildUnderTest:
        if self.server is None:
            return self.build
        if reason := self.server.death():
            raise ReferenceBroken(f"the reference build's server is gone: {reason}")
        return replace(self.build, base_url=self.server.base_url)


@contextlib.contextmanager
def reference_server(settings: ABSettings, build: BuildUnderTest, folder: Path
                     ) -> Iterator[ReferenceServer]:
    """Start the reference build's server for the whole bisect (persistent plans only); it
    is stopped on every way out."""
    plan = settings.plan
    if plan.ab.servers != "persistent":
        yield ReferenceServer(build)
        return
    if plan.server.tiny_model is not None:
        model = str(tiny_model.ensure(plan.server.tiny_model, settings.cache_dir,
                                      log=settings.progress))
    else:
        model = str(plan.server.model)
        tiny_model.check_model_folder(model)
    server = VllmServer(plan.server, model, folder / "server.log", python=build.python,
                        log=settings.progress, env=build.env)
    settings.progress(f"reference build: starting its server for every step (log: "
                      f"{folder / 'server.log'})")
    try:
        with server:
            yield ReferenceServer(build, server)
    except MeasurementError as exc:
        if server.startup_s is None:
            raise ReferenceBroken(f"the reference build's server did not start: {exc}") from None
        raise
