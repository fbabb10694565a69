"""How `gate bisect` measures a build against the good (or parent) build: the one place it
calls gate.flows.ab, and what a step does with an A/B that is not decided
(docs/bisect.md#a-step).

Each step is one sequential A/B (`gate ab`'s blocks of rounds on fresh server pairs, sized by
the runner's calibration) of the step's build against the reference build. When it ends
inconclusive because the step's budget stopped it, its own test is resumed with what is left
of the budget (more blocks of the same sequential test); when its design is spent, a new A/B
is started while the step's attempts and budget allow (each a whole test at the plan's
confidence: two at most double the chance of a wrong decision on that step). What stays
inconclusive is skipped by the search.

On a runner with no calibration for the plan, `gate ab` learns the runner's noise from its
own blocks; with a plan of one block (what a cheap bisect runs) only that block's look for
gross effects can decide (docs/compare.md, "The sequential test"): a fail is a bad step, a
block with no gross slowdown a good one ("screened"), so the bisect then finds the first
commit with a gross slowdown, and says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from gate.core.errors import EXIT_UNDECIDED, GateError, MeasurementError
from gate.core.files import write_atomic
from gate.core.progress import Progress
from gate.evidence.bisect_record import Measured
from gate.evidence.bisection import deciding_effect
from gate.flows import ab
from gate.flows.sides import Build
from gate.judge.ab_design import NoDesign
from gate.judge.verdict import Outcome, Verdict
from gate.plan.spec import Plan
from gate.plan.thresholds import Thresholds


@dataclass(frozen=True)
class BuildUnderTest:
    """A build as an A/B side: the interpreter and the server's environment."""

    python: str
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class ABSettings:
    """What every A/B of one bisect shares."""

    plan: Plan
    thresholds: Thresholds
    noise_dirs: list[Path] | None
    profiling: ab.Profiling
    cache_dir: Path
    progress: Progress
    step_budget_minutes: float | None = None
    max_attempts: int = 2
    cache_calibrations: bool = True  # False: calibrations from noise_dirs only


@dataclass(frozen=True)
class ABOutcome:
    """One A/B's outcome for the bisect. `verdict` None: screened, no gross slowdown."""

    verdict: Verdict | None
    profile_diff: Path | None
    seconds: float
    base_broken: list[str] = field(default_factory=list)
    screened: str = ""  # why nothing passes here (the runner's missing calibration)
    finished: bool = True  # its sequential test is over: more blocks cannot be added
    screened_rounds: int = 0  # the screening block's rounds (a screen leaves no verdict)

    @property
    def rounds(self) -> int:
        return (self.verdict.rounds or 0) if self.verdict else self.screened_rounds

    @property
    def outcome(self) -> Outcome | None:
        return self.verdict.outcome if self.verdict else None


class ABRunner:
    """The A/B calls a step makes: start a test, or add blocks to one (tests swap in a
    double that decides by what the build imports)."""

    def run(self, settings: ABSettings, *, base: BuildUnderTest, head: BuildUnderTest,
            out: Path) -> ABOutcome:
        options = ab.ABOptions(
            plan=settings.plan, base=Build(label="base", python=base.python, env=base.env),
            head=Build(label="head", python=head.python, env=head.env), out=out,
            cache_dir=settings.cache_dir, thresholds=settings.thresholds,
            noise_dirs=settings.noise_dirs, cache_calibrations=settings.cache_calibrations,
            progress=settings.progress, profiling=settings.profiling, screen=True)
        return _call(lambda: ab.ab(options), out)

    def resume(self, settings: ABSettings, out: Path, *, budget_minutes: float | None
               ) -> ABOutcome:
        options = ab.ResumeOptions(out=out, cache_dir=settings.cache_dir,
                                   budget_minutes=budget_minutes, progress=settings.progress,
                                   profiling=settings.profiling)
        return _call(lambda: ab.resume(options), out)


def _call(start, out: Path) -> ABOutcome:
    began = time.monotonic()
    result = start()
    if isinstance(result, NoDesign):
        if not result.uncalibrated:  # nothing a step could decide: the bisect stops, naming why
            raise GateError(result.why, exit_code=EXIT_UNDECIDED)
        # a runner that must be calibrated first (screen=False)
        return ABOutcome(verdict=None, profile_diff=None, seconds=time.monotonic() - began,
                         screened=result.why)
    write_atomic(out / "verdict.json", result.verdict.model_dump_json(indent=1))
    if result.verdict.outcome == Outcome.UNDECIDED:  # one screening block, no gross slowdown
        return ABOutcome(verdict=None, profile_diff=None, seconds=time.monotonic() - began,
                         screened=result.verdict.headline.removeprefix("UNDECIDED: "),
                         screened_rounds=result.verdict.rounds or 0)
    recorded = result.state  # the test as the A/B left it (not read back from its folder)
    if (result.verdict.outcome == Outcome.INCONCLUSIVE and recorded is not None
            and recorded.finished and not recorded.calibrations
            and recorded.design.max_rounds <= recorded.design.rounds_per_block):
        return ABOutcome(verdict=None, profile_diff=None, seconds=time.monotonic() - began,
                         screened=ONE_BLOCK, screened_rounds=recorded.rounds_done)
    return ABOutcome(verdict=result.verdict,
                     profile_diff=out / "profile-diff" if result.profile is not None else None,
                     seconds=time.monotonic() - began,
                     base_broken=[e for e in result.verdict.errors if e.startswith("base")],
                     finished=recorded.finished if recorded is not None else True)


ONE_BLOCK = ("no calibration of this runner and a design of one block: only its look for gross "
             "effects could decide, and it found none")


class ReferenceBroken(MeasurementError):
    """The good (or parent) build could not be measured: no step can be judged."""


def decide(settings: ABSettings, *, base: BuildUnderTest, head: BuildUnderTest, folder: Path,
           runner: ABRunner) -> Measured:
    """A/B `head` against `base` until decided, within the step's budget and attempts."""
    runs: list[tuple[Path, ABOutcome]] = []
    started = time.monotonic()
    while True:
        spent = time.monotonic() - started
        if runs and not runs[-1][1].finished:
            out = runs[-1][0]
            attempt = runner.resume(settings, out, budget_minutes=_left(settings, spent))
        else:
            out = folder / f"ab{len({p for p, _ in runs}) + 1}"
            attempt = runner.run(replace(settings, plan=_plan_within(settings, spent)),
                                 base=base, head=head, out=out)
        runs.append((out, attempt))
        if attempt.base_broken:
            raise ReferenceBroken("the reference build broke: " + attempt.base_broken[0])
        if not _again(settings, runs, spent_s=time.monotonic() - started):
            break
    return _measured(runs, time.monotonic() - started)


def _measured(runs: list[tuple[Path, ABOutcome]], seconds: float) -> Measured:
    out, last = runs[-1]
    last_per_test = {path: run for path, run in runs}  # a resumed test counts its rounds once
    return Measured(
        outcome=last.outcome, effect=deciding_effect(last.verdict) if last.verdict else None,
        rounds=sum(r.rounds for r in last_per_test.values()),
        attempts=len(runs), seconds=round(seconds, 1), folder=str(out),
        profile_diff=str(last.profile_diff) if last.profile_diff else None,
        screened=bool(last.screened), reason=_reason(last))


def _left(settings: ABSettings, spent_s: float) -> float | None:
    if settings.step_budget_minutes is None:
        return settings.plan.ab.budget_minutes
    return max(settings.step_budget_minutes - spent_s / 60, 0.1)


def _plan_within(settings: ABSettings, spent_s: float) -> Plan:
    """The plan with its A/B budget cut to what is left of the step's."""
    if settings.step_budget_minutes is None:
        return settings.plan
    left = _left(settings, spent_s) or 0.1
    budget = settings.plan.ab.budget_minutes
    ab_spec = settings.plan.ab.model_copy(update={
        "budget_minutes": left if budget is None else min(budget, left)})
    return settings.plan.model_copy(update={"ab": ab_spec})


def _again(settings: ABSettings, runs: list[tuple[Path, ABOutcome]], *, spent_s: float
           ) -> bool:
    last = runs[-1][1]
    if last.outcome != Outcome.INCONCLUSIVE or len(runs) >= settings.max_attempts:
        return False
    if settings.step_budget_minutes is None:
        return True
    return spent_s + last.seconds <= settings.step_budget_minutes * 60


def _reason(run: ABOutcome) -> str:
    if run.screened:
        return "screened, no gross slowdown: " + run.screened.splitlines()[0]
    verdict = run.verdict
    if verdict is None or verdict.outcome in (Outcome.PASS, Outcome.FAIL):
        return ""
    if verdict.outcome == Outcome.INCONCLUSIVE:
        return "inconclusive: " + verdict.headline
    return "could not be measured: " + (verdict.errors[0] if verdict.errors else verdict.headline)
