"""`gate ab`: measure the base build and the PR build on the same runner, round by round, and
stop as soon as the verdict is decided.

A round measures every cell of the plan once on each build, adjacent in time:

- `ab.servers: persistent` (the CPU plan): both servers stay up for the whole A/B and the
  builds alternate cell by cell, in ABBA order across rounds, so drift of the machine lands on
  both builds alike and cancels in each round's paired head/base ratio;
- `ab.servers: per_round` (GPU plans, where two servers do not fit): a fresh server per build
  and round, base then head, alternating which goes first.

Round r of each build is its repeat r. After each round the rounds so far are judged
(gate.judge.compare, with the sequential test's confidence for this look); the A/B stops when every
judged check is decided, when a check fails, when the measurement breaks, or when the next
round would not fit the budget (then undecided checks stay inconclusive).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gate.core.errors import GateError, MeasurementError
from gate.core.progress import Progress
from gate.flows import run
from gate.flows.diff_artifacts import ProfilePair, write_diff
from gate.judge.verdict import Outcome, Verdict
from gate.measure.measured_build import Launch, MeasuredBuild, cells_for_repeat, open_measured_build
from gate.measure.results import Results, ServerInfo, save_results
from gate.plan import runner_pin
from gate.plan.spec import Plan
from gate.profile.diff_file import DiffSettings, ProfileDiff
from gate.profile.sampling import SamplingOptions, should_profile
from gate.profile.traffic import ProfileTarget, profile_server
from gate.runner.doctor import DoctorReport, Finding
from gate.runner.fingerprint import Fingerprint, ServedFacts

# judge(head, base) -> Verdict; results carry sequential_rounds, so the rounds so far are the
# sequential test's looks (gate.judge.compare)
Judge = Callable[[Results, Results | None], Verdict]


@dataclass
class Build:
    """One side of the A/B: the interpreter whose vLLM to launch, plus its own environment."""

    label: str
    python: str = field(default_factory=lambda: sys.executable)
    env: dict[str, str] = field(default_factory=dict)


def resolve_python(spec: str | None) -> str:
    """An interpreter path, or a virtualenv folder (its bin/python); None: this interpreter."""
    if not spec:
        return sys.executable
    path = Path(spec)
    if path.is_dir():
        path = path / "bin" / "python"
    if not path.is_file():
        raise GateError(f"{spec} is neither a Python interpreter nor a virtualenv folder")
    return str(path)


@dataclass
class Side:
    """Everything measured on one build so far, across rounds (and servers)."""

    build: Build
    out: Path
    info: ServerInfo
    fingerprint: Fingerprint
    sessions: list[MeasuredBuild] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def results(self, plan: Plan, rounds: int) -> Results:
        res = run.assemble(plan.model_copy(update={"repeats": max(rounds, 1)}),
                           self.build.label, self.fingerprint, self.info,
                           _merge_sessions(self.sessions), self.errors, {})
        return res.model_copy(update={"sequential_rounds": plan.ab.max_rounds})


def _merge_sessions(sessions: list[MeasuredBuild]) -> MeasuredBuild | None:
    if not sessions:
        return None
    if len(sessions) == 1:
        return sessions[0]
    first = sessions[0]
    merged = MeasuredBuild(first.plan, first.label, first.base_url, first.model_name,
                          first.progress)
    findings: dict[tuple[str, str], Finding] = {}
    for s in sessions:
        merged.records += s.records
        merged.cells += s.cells
        for f in s.doctor.findings if s.doctor else []:
            findings.setdefault((f.id, f.title), f)
        for k, v in s.timings.items():
            merged.timings[k] = merged.timings.get(k, 0.0) + v
    merged.doctor = DoctorReport(findings=list(findings.values()),
                                 served=_one_served(sessions))
    return merged


def _one_served(sessions: list[MeasuredBuild]) -> ServedFacts | None:
    """What the servers of one build's rounds showed: the first's, or every runner they named
    when rounds ran on different runners (the judge then calls the measurement an error)."""
    served = [s.doctor.served for s in sessions if s.doctor and s.doctor.served]
    runners = sorted({r for s in served for r in [s.model_runner, *s.runner_conflict] if r})
    if len(runners) > 1:
        return ServedFacts(runner_conflict=runners)
    return served[0] if served else None


def runner_mismatch(base: MeasuredBuild, head: MeasuredBuild) -> str | None:
    """Why the two builds' servers cannot be compared: they run different model runners."""
    runners = {s.label: s.doctor.served.model_runner if s.doctor and s.doctor.served else None
               for s in (base, head)}
    if None in runners.values() or runners["base"] == runners["head"]:
        return None
    return (f"the base server runs the {runner_pin.label(runners['base'])} and the head "
            f"server the {runner_pin.label(runners['head'])}: their structured-output code "
            "paths differ, so the A/B is not measured; pin one runner for both "
            "(VLLM_USE_V2_MODEL_RUNNER in the plan's server.env, or --model-runner)")


@dataclass
class ABResult:
    verdict: Verdict
    base: Results
    head: Results
    profile: ProfileDiff | None = None


@dataclass
class Profiling:
    """When and how to profile both builds after the rounds (gate.profile.sampling)."""

    policy: str = "auto"  # always, never, auto: when a check failed or is inconclusive
    options: SamplingOptions = field(default_factory=SamplingOptions)
    diff: DiffSettings = field(default_factory=DiffSettings)


def ab(plan: Plan, base: Build, head: Build, out: Path, judge: Judge, progress: Progress,
       cache_dir: Path, profiling: Profiling | None = None) -> ABResult:
    started = time.monotonic()
    sides = {b.label: _side(plan, b, out, cache_dir) for b in (base, head)}
    profiler = _Profiler(plan, out, profiling or Profiling(policy="never"), progress)
    loop = _persistent_rounds if plan.ab.servers == "persistent" else _per_round_rounds
    verdict, rounds = loop(plan, sides, out, judge, progress, cache_dir, started, profiler)
    results = {label: side.results(plan, rounds) for label, side in sides.items()}
    for label, res in results.items():
        save_results(res, out / label / "results.json")
    notes = verdict.notes + profiler.notes
    verdict = verdict.model_copy(update={
        "rounds": rounds, "notes": notes,
        "runner_seconds": _runner_seconds(results, time.monotonic() - started, profiler)})
    return ABResult(verdict, results["base"], results["head"], profiler.diff)


class _Profiler:
    """Profiles both builds once the verdict is known, on servers that are still up, and
    diffs them; a failure to profile is a note, never a change of the verdict."""

    def __init__(self, plan: Plan, out: Path, profiling: Profiling, progress: Progress):
        self.plan, self.out, self.profiling, self.progress = plan, out, profiling, progress
        self.diff: ProfileDiff | None = None
        self.notes: list[str] = []
        self.seconds = 0.0

    def wanted(self, verdict: Verdict) -> bool:
        return should_profile(self.profiling.policy, [c.outcome for c in verdict.checks])

    def run(self, sessions: dict[str, MeasuredBuild]) -> None:
        started = time.monotonic()
        try:
            profiles = {}
            for label in ("base", "head"):
                s = sessions[label]
                self.progress(f"{label}: profiling the serving processes (py-spy)")
                target = ProfileTarget(s.base_url, label=label, pid=s.server_pid)
                profiles[label] = profile_server(
                    target, self.plan, self.out / label / "profile", self.profiling.options,
                    log=self.progress)
            pair = ProfilePair(profiles["base"], profiles["head"], self.out / "base" / "profile",
                               self.out / "head" / "profile")
            written = write_diff(pair, self.out / "profile-diff", self.profiling.diff)
            self.diff = written.diff
            self.progress("profile diff:\n" + written.table)
        except (GateError, MeasurementError) as exc:
            self.notes.append(f"no profile diff: {str(exc).splitlines()[0]}")
            self.progress(f"profiling failed: {exc}")
        self.seconds += time.monotonic() - started


def _side(plan: Plan, build: Build, out: Path, cache_dir: Path) -> Side:
    opts = run.RunOptions(out=out / build.label, cache_dir=cache_dir, python=build.python,
                          label=build.label, env=build.env)
    timings: dict[str, float] = {}
    return Side(build, opts.out, run.server_info(plan, opts),
                run.collect_fingerprint(plan, opts, timings))


def _launch(side: Side, cache_dir: Path, round_dir: str | None = None) -> Launch:
    out = side.out / round_dir if round_dir else side.out
    return Launch(side.build.label, out, cache_dir, side.build.python, side.build.env)


class _Stop(Exception):
    """The measurement broke: judge what there is and stop."""


def _persistent_rounds(plan, sides, out, judge, progress, cache_dir, started, profiler):
    base, head = sides["base"], sides["head"]
    with contextlib.ExitStack() as stack:
        try:
            for side in (base, head):
                side.sessions.append(stack.enter_context(
                    open_measured_build(plan, _launch(side, cache_dir), side.info, progress)))
        except MeasurementError as exc:
            _record_error(sides, exc, progress)
            return _judge(plan, sides, judge, 0), 0
        if mismatch := runner_mismatch(base.sessions[0], head.sessions[0]):
            _record_error(sides, MeasurementError(mismatch), progress)
            return _judge(plan, sides, judge, 0), 0
        measure_round = _alternating_round(base.sessions[0], head.sessions[0])
        verdict, rounds = _rounds(plan, sides, judge, progress, started, measure_round)
        if verdict.outcome != Outcome.ERROR and profiler.wanted(verdict):
            profiler.run({"base": base.sessions[0], "head": head.sessions[0]})
        return verdict, rounds


def _alternating_round(base: MeasuredBuild, head: MeasuredBuild):
    def measure_round(plan: Plan, r: int) -> None:
        for i, cell in enumerate(cells_for_repeat(plan, r)):
            for session in ((base, head) if (r + i) % 2 == 0 else (head, base)):
                session.measure(cell)
    return measure_round


def _per_round_rounds(plan, sides, out, judge, progress, cache_dir, started, profiler):
    def measure_round(plan: Plan, r: int) -> None:
        order = ("base", "head") if r % 2 == 0 else ("head", "base")
        for label in order:
            side = sides[label]
            with open_measured_build(plan, _launch(side, cache_dir, f"round{r + 1}"), side.info,
                              progress) as session:
                side.sessions.append(session)
                _refuse_other_runner(sides)
                for cell in cells_for_repeat(plan, r):
                    session.measure(cell)
    verdict, rounds = _rounds(plan, sides, judge, progress, started, measure_round)
    if verdict.outcome != Outcome.ERROR and profiler.wanted(verdict):
        # The rounds' servers are gone: one more server per build, for the profile alone.
        with contextlib.ExitStack() as stack:
            try:
                sessions = {label: stack.enter_context(open_measured_build(
                    plan, _launch(side, cache_dir, "profile-server"), ServerInfo(
                        base_url="", started_by_gate=True, model=""), progress))
                    for label, side in sides.items()}
            except MeasurementError as exc:
                profiler.notes.append(f"no profile diff: {str(exc).splitlines()[0]}")
            else:
                profiler.run(sessions)
    return verdict, rounds


def _refuse_other_runner(sides: dict[str, Side]) -> None:
    """Stop before measuring on a server whose model runner is not the other build's."""
    base, head = sides["base"].sessions, sides["head"].sessions
    if base and head and (mismatch := runner_mismatch(base[-1], head[-1])):
        raise MeasurementError(mismatch)


def _rounds(plan, sides, judge, progress, started, measure_round):
    spec, verdict, rounds, round_times = plan.ab, None, 0, []
    for r in range(spec.max_rounds):
        if not _fits_budget(spec.budget_minutes, started, round_times, progress):
            break
        t0 = time.monotonic()
        progress(f"A/B round {r + 1} of at most {spec.max_rounds}")
        try:
            measure_round(plan, r)
        except MeasurementError as exc:
            _record_error(sides, exc, progress)
            rounds = r + 1
            return _judge(plan, sides, judge, rounds), rounds
        rounds, round_times = r + 1, [*round_times, time.monotonic() - t0]
        verdict = _judge(plan, sides, judge, rounds)
        progress(f"after round {rounds}: {verdict.headline}")
        if rounds >= spec.min_rounds and decided(verdict):
            break
    if verdict is None:
        verdict = _judge(plan, sides, judge, rounds)
    return verdict, rounds


def decided(verdict: Verdict) -> bool:
    """Nothing more to learn: a check failed, the measurement broke, or every check passed."""
    return verdict.outcome != Outcome.INCONCLUSIVE


def _fits_budget(budget_minutes, started, round_times, progress) -> bool:
    if budget_minutes is None or not round_times:
        return True
    expected_end = time.monotonic() - started + max(round_times)
    if expected_end <= budget_minutes * 60:
        return True
    progress(f"budget of {budget_minutes:g} min: another round (about {max(round_times):.0f} s) "
             "would not fit; stopping")
    return False


def _record_error(sides: dict[str, Side], exc: MeasurementError, progress: Progress) -> None:
    message = str(exc)
    who = next((label for label in sides if message.startswith(f"{label}:")), None)
    for label, side in sides.items():
        if who in (None, label):
            side.errors.append(message)
    progress(f"measurement error: {message.splitlines()[0]}")


def _judge(plan: Plan, sides: dict[str, Side], judge: Judge, rounds: int) -> Verdict:
    return judge(sides["head"].results(plan, rounds), sides["base"].results(plan, rounds))


def _runner_seconds(results: dict[str, Results], wall_s: float, profiler: _Profiler
                    ) -> dict[str, float]:
    """Where the runner's time went, summed over both builds."""
    out: dict[str, float] = {}
    for res in results.values():
        for key, value in res.timings_s.items():
            name = key.removesuffix("_s")
            out[name] = out.get(name, 0.0) + value
    if profiler.seconds:
        out["profile"] = profiler.seconds
    out["wall"] = wall_s
    return {k: round(v, 1) for k, v in out.items()}

