"""`gate ab`: measure the base and the PR build on the same runner in blocks of rounds, and stop
as soon as the sequential test decides (docs/compare.md, "The A/B design").

A round measures every cell of the plan once on each build, adjacent in time. A block is
`ab.rounds_per_block` rounds (ABBA: which build goes first flips every round) on one pair of
servers:

- `ab.servers: persistent` (the CPU plan): both servers are up for the block and the builds
  alternate cell by cell, so drift of the machine lands on both alike; the pair is stopped and
  a fresh one started for the next block, so that each block carries its own server offset;
- `ab.servers: per_round` (GPU plans, where two servers do not fit): a fresh server per build
  and round, one at a time.

Before the first round the design is fixed (gate.judge.ab_design): sized by the runner's
calibration when one applies, else the plan's limits, the test then learning the runner's
noise from its own blocks. After every round the rounds so far are judged (gate.judge
.compare); the A/B stops when the verdict is decided, when the measurement breaks, at the
design's last block, or before a block that would end past the budget. `OUT/ab-state.json`
keeps the design, so `resume` adds blocks to the same sequential test instead of starting a
new one.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from gate.core.errors import GateError, MeasurementError
from gate.core.progress import Progress
from gate.evidence.hunks import HunkSet
from gate.flows import run
from gate.flows.ab_state import (
    STATE_FILE,
    ABState,
    BuildIdentity,
    FixedDesign,
    load_state,
    save_state,
)
from gate.flows.diff_artifacts import ProfilePair, write_diff
from gate.judge.ab_design import NoDesign, design_ab
from gate.judge.compare import ABReference, compare_results
from gate.judge.noise import CalibrationCost, Noise, noise_dirs, noise_for, runner_key
from gate.judge.sizing import RunnerCost
from gate.judge.verdict import Outcome, Verdict
from gate.measure.measured_build import (
    Launch,
    MeasuredBuild,
    cells_for_repeat,
    open_measured_build,
    start_server,
)
from gate.measure.results import Results, ServerInfo, load_results, save_results
from gate.measure.server import paused
from gate.plan import runner_pin
from gate.plan.spec import Plan
from gate.plan.thresholds import Thresholds
from gate.profile.diff_file import DiffSettings, ProfileDiff
from gate.profile.sampling import SamplingOptions, should_profile
from gate.profile.traffic import ProfileTarget, profile_server
from gate.runner.doctor import DoctorReport, Finding
from gate.runner.fingerprint import Fingerprint, ServedFacts


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
class Profiling:
    """When and how to profile both builds after the rounds (gate.profile.sampling)."""

    policy: str = "auto"  # always, never, auto: when a check failed or is inconclusive
    options: SamplingOptions = field(default_factory=SamplingOptions)
    diff: DiffSettings = field(default_factory=DiffSettings)
    # what changed between the builds (two releases: gate.evidence.release_diff), ranked by
    # the profile diff
    hunkset: HunkSet | None = None


@dataclass
class ABOptions:
    """One A/B: what to measure, where, and how it is judged. The public entry point is
    `ab(options)`; `resume(ResumeOptions)` continues one."""

    plan: Plan
    base: Build
    head: Build
    out: Path
    cache_dir: Path  # Settings.cache_dir: the tiny model, the runner's own calibrations
    thresholds: Thresholds | None = None  # None: the plan's
    noise_dirs: list[Path] | None = None  # None: ./baselines/noise; and the cache's:
    cache_calibrations: bool = True  # False: not the cache folder's (GATE_CACHE_CALIBRATIONS)
    progress: Progress = field(default_factory=lambda: Progress(quiet=True))
    profiling: Profiling = field(default_factory=lambda: Profiling(policy="never"))
    # Without a calibration: run the test on the run's own noise; False: stop before measuring
    # (NoDesign, exit 5: gate ab --calibrate calibrates first).
    screen: bool = True
    started_in: str | None = None  # the CI run's URL, kept in ab-state.json for a rerun


@dataclass
class ABResult:
    verdict: Verdict
    base: Results
    head: Results
    design: FixedDesign
    profile: ProfileDiff | None = None
    state: ABState | None = None  # the test as saved in ab-state.json: rounds, finished


class SideError(MeasurementError):
    """A measurement that broke on one side of the A/B: `side` says which ("both" when the
    two sides cannot be compared at all, e.g. their servers run different model runners)."""

    def __init__(self, side: str, cause: MeasurementError):
        super().__init__(str(cause))
        self.side = side


# ---------------------------------------------------------------- the sides


@dataclass
class Side:
    """Everything measured on one build so far, across blocks, servers and resumed runs."""

    build: Build
    out: Path
    info: ServerInfo
    fingerprint: Fingerprint
    earlier: Results | None = None  # what the run before a resume measured
    sessions: list[MeasuredBuild] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.build.label

    def results(self, plan: Plan, rounds: int, max_rounds: int) -> Results:
        res = run.assemble(plan.model_copy(update={"repeats": max(rounds, 1)}), self.label,
                           self.fingerprint, self.info, self._merged(), self.errors, {})
        if self.earlier is not None:
            timings = dict(self.earlier.timings_s)
            for key, value in res.timings_s.items():
                timings[key] = timings.get(key, 0.0) + value
            res = res.model_copy(update={"timings_s": timings,
                                         "errors": self.earlier.errors + res.errors})
        return res.model_copy(update={"sequential_rounds": max_rounds})

    def _merged(self) -> MeasuredBuild | None:
        """One session holding every cell and record so far (and the doctor's findings)."""
        if not self.sessions and self.earlier is None:
            return None
        first = self.sessions[0] if self.sessions else None
        plan = first.plan if first else self.earlier.plan  # type: ignore[union-attr]
        merged = MeasuredBuild(plan, self.label, "", "", Progress(quiet=True))
        findings: dict[tuple[str, str], Finding] = {}
        parts: list[Results | MeasuredBuild] = [*([self.earlier] if self.earlier else []),
                                                *self.sessions]
        for part in parts:
            merged.records += part.records
            merged.cells += part.cells
            for f in part.doctor.findings if part.doctor else []:
                findings.setdefault((f.id, f.title), f)
        for s in self.sessions:
            for k, v in s.timings.items():
                merged.timings[k] = merged.timings.get(k, 0.0) + v
        merged.doctor = DoctorReport(findings=list(findings.values()),
                                     served=_one_served(self.sessions))
        return merged


def _one_served(sessions: list[MeasuredBuild]) -> ServedFacts | None:
    """What the servers of one build showed: the first's, or every runner they named when
    its servers ran on different runners (the judge then calls the measurement an error)."""
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


def kv_mismatch(base: MeasuredBuild, head: MeasuredBuild) -> str | None:
    """Why the pair is not a fair pair: their KV caches differ (what each can batch)."""
    kv = {s.label: s.doctor.served.kv_cache_tokens if s.doctor and s.doctor.served else None
          for s in (base, head)}
    if None in kv.values() or kv["base"] == kv["head"]:
        return None
    return (f"the base server's KV cache holds {kv['base']:,} tokens and the head's "
            f"{kv['head']:,} (their logs): the pair can batch differently, an asymmetry the A/B "
            "would blame on the code; fix the KV cache size (server.kv_cache_memory_bytes, or "
            "VLLM_CPU_KVCACHE_SPACE on CPU)")


def _refuse_other_runner(abrun: ABRun) -> None:
    """Stop before measuring on a server whose model runner or KV cache is not the other
    build's."""
    base, head = abrun.sides["base"].sessions, abrun.sides["head"].sessions
    if base and head and (mismatch := runner_mismatch(base[-1], head[-1])
                          or kv_mismatch(base[-1], head[-1])):
        raise SideError("both", MeasurementError(mismatch))


def shared_gpu_problem(plan: Plan, sides: dict[str, Side]) -> str | None:
    """Two servers on one GPU started with KV caches sized from free memory: refused."""
    on_gpu = any(side.fingerprint.gpus for side in sides.values())
    if on_gpu and plan.ab.servers == "persistent" and plan.server.kv_cache_memory_bytes is None:
        return ("both servers of a pair share the GPU, and vLLM sizes each one's KV cache from "
                "the memory free when it starts: set server.kv_cache_memory_bytes in the plan "
                "(one fixed size for both), or ab.servers: per_round")
    return None


def origin_problems(plan: Plan, sides: dict[str, Side]) -> list[str]:
    """Why the two sides would not measure the builds they name: a build whose vLLM comes from
    outside it (not its interpreter's prefix, its editable source or a PYTHONPATH entry it sets
    itself: a checkout in the working directory, a leaked PYTHONPATH), or two different builds
    that import one and the same vllm folder (the A/B would be an A/A)."""
    out, origins = [], {}
    for label, side in sides.items():
        origin = side.fingerprint.vllm_origin
        if origin is None:
            continue  # no vLLM found: the server's start says why
        env = {**plan.server.env, **side.build.env}
        own = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if not origin.belongs_to(own):
            out.append(f"the {label} build imports vllm from {origin.path}, outside the build "
                       f"({side.build.python}: prefix {origin.prefix}"
                       + (f", editable source {origin.editable_source}" if origin.editable_source
                          else "") + (f", PYTHONPATH {os.pathsep.join(own)}" if own else "")
                       + ")")
        origins[label] = origin
    if len(origins) == 2:
        # Two interpreters (their own prefixes) are two builds; one interpreter with another
        # environment (a fixture, an overlay) is one build, or an overlay whose folder differs.
        base, head = origins["base"], origins["head"]
        if base.prefix != head.prefix and \
                os.path.realpath(base.path) == os.path.realpath(head.path):
            out.append(f"the base ({sides['base'].build.python}) and the head "
                       f"({sides['head'].build.python}) are different builds but both import "
                       f"vllm from {base.path}: the A/B would measure one build twice")
    return out


def make_side(plan: Plan, build: Build, out: Path, cache_dir: Path) -> Side:
    opts = run.RunOptions(out=out / build.label, cache_dir=cache_dir, python=build.python,
                          label=build.label, env=build.env)
    return Side(build, opts.out, run.server_info(plan, opts),
                run.collect_fingerprint(plan, opts, {}))


# ---------------------------------------------------------------- the run context


@dataclass
class ABRun:
    """One A/B in progress: the plan, both sides, the fixed design and where its time goes."""

    plan: Plan
    thresholds: Thresholds
    noise: Noise
    design: FixedDesign
    sides: dict[str, Side]
    out: Path
    cache_dir: Path
    progress: Progress
    profiler: Profiler
    rounds: int = 0  # rounds measured, earlier runs included
    started: float = field(default_factory=time.monotonic)
    pair_s: list[float] = field(default_factory=list)
    round_s: list[float] = field(default_factory=list)
    verdict: Verdict | None = None

    @property
    def blocks(self) -> int:
        return self.rounds // self.plan.ab.rounds_per_block

    @property
    def max_rounds(self) -> int:
        return self.design.max_rounds

    def results(self, label: str) -> Results:
        return self.sides[label].results(self.plan, self.rounds, self.max_rounds)

    def judge(self) -> Verdict:
        base, path = self.results("base"), str(self.out / "base" / "results.json")
        self.verdict = compare_results(
            self.results("head"), ABReference(base, path), self.thresholds, noise=self.noise,
            head_path=str(self.out / "head" / "results.json"))
        return self.verdict

    def source_roots(self) -> dict[str, list[Path]]:
        """The folder above each build's vllm package, where its interpreter imports it from:
        a commit's overlay or a source checkout is outside site-packages, and its frames must
        be named as the other build's are (vllm/...) for the two profiles to meet."""
        return {label: [Path(side.fingerprint.vllm_origin.path).parent]
                if side.fingerprint.vllm_origin else [] for label, side in self.sides.items()}

    def launch(self, side: Side, server_dir: str) -> Launch:
        cpus = split_cpus(side.label, self.blocks) if self.plan.ab.isolation == "split" else None
        env = dict(side.build.env)
        if cpus is not None:  # vLLM's CPU worker binds its OpenMP threads to these
            env.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(str(c) for c in cpus))
        return Launch(side.label, side.out / server_dir, self.cache_dir, side.build.python, env,
                      cpus=cpus)

    @contextlib.contextmanager
    def blame(self, side: Side) -> Iterator[None]:
        """A measurement that breaks inside the block is this side's."""
        try:
            yield
        except SideError:
            raise
        except MeasurementError as exc:
            raise SideError(side.label, exc) from exc

    def cost(self) -> CalibrationCost | None:
        if not self.pair_s or not self.round_s:
            return None
        # The first pair of a run may start on cold compile caches (a build's first start
        # takes minutes longer): priced from the pairs after it when there are any.
        pairs = self.pair_s[1:] or self.pair_s
        return CalibrationCost(pair_s=sum(pairs) / len(pairs),
                               round_s=sum(self.round_s) / len(self.round_s))


# ---------------------------------------------------------------- public entry points


def ab(options: ABOptions) -> ABResult | NoDesign:
    """Run one A/B from its first round: fix the design (from the runner's calibration, or the
    plan's limits when none applies), then measure blocks until decided. NoDesign: no A/B can
    start here, said before anything is measured."""
    plan, thresholds = options.plan, options.thresholds or options.plan.thresholds
    sides = {b.label: make_side(plan, b, options.out, options.cache_dir)
             for b in (options.base, options.head)}
    refused = origin_problems(plan, sides)
    if (gpu := shared_gpu_problem(plan, sides)) is not None:
        raise GateError(gpu)
    for side in sides.values():
        side.errors += refused
    cache = options.cache_dir if options.cache_calibrations else None
    noise = noise_for(noise_dirs(options.noise_dirs, cache), plan.name,
                      plan.measurement_hash(), sides["head"].fingerprint)
    designed = design_ab(plan, thresholds, noise=noise, require_calibration=not options.screen)
    if isinstance(designed, NoDesign):
        return designed
    design = FixedDesign.of(designed)
    options.progress(f"design: {design.description}")
    if design.note:
        options.progress(f"  note: {design.note}")
    abrun = ABRun(plan, thresholds, noise, design, sides, options.out, options.cache_dir,
                  options.progress, Profiler(plan, options.out, options.profiling,
                                              options.progress))
    state = _start_state(abrun).model_copy(update={"started_in": options.started_in})
    if refused:
        options.progress("not measured: " + "; ".join(refused))
    return _finish(abrun, state, measure=not refused)


def _start_state(abrun: ABRun) -> ABState:
    """The state of a test that starts now: what it fixed, and which builds it measures."""
    return ABState(
        plan=abrun.plan.name, plan_hash=abrun.plan.measurement_hash(),
        runner_key=runner_key(abrun.sides["head"].fingerprint), thresholds=abrun.thresholds,
        design=abrun.design, calibrations=list(abrun.noise.calibrations),
        noise_description=abrun.noise.description,
        builds={label: BuildIdentity.of(s.build.python, s.build.env, s.fingerprint)
                for label, s in abrun.sides.items()})


@dataclass
class ResumeOptions:
    """Continue the A/B in `out` (its ab-state.json and both results.json) with more blocks.
    base/head: the builds, when their interpreters moved (a new CI job); their vLLM must be
    the one measured before."""

    out: Path
    cache_dir: Path
    base: Build | None = None
    head: Build | None = None
    budget_minutes: float | None = None  # this run's budget; None: the plan's
    progress: Progress = field(default_factory=lambda: Progress(quiet=True))
    profiling: Profiling = field(default_factory=lambda: Profiling(policy="never"))


def resume(options: ResumeOptions) -> ABResult:
    """Add blocks to the sequential test the A/B in `options.out` started, up to its design's
    maximum and within the plan's budget for this run."""
    state = load_state(options.out / STATE_FILE)
    earlier = {label: load_results(options.out / label / "results.json")
               for label in ("base", "head")}
    plan = earlier["head"].plan.model_copy(update={"repeats": 1})
    if options.budget_minutes is not None:
        plan = plan.model_copy(update={"ab": plan.ab.model_copy(
            update={"budget_minutes": options.budget_minutes})})
    given = {"base": options.base, "head": options.head}
    builds = {label: given[label] or Build(label, state.builds[label].python,
                                           state.builds[label].env) for label in given}
    sides = {label: make_side(plan, b, options.out, options.cache_dir) for label, b in builds.items()}
    state.check_resumable(plan, earlier, {label: s.fingerprint for label, s in sides.items()})
    for label, side in sides.items():
        side.earlier = earlier[label]
    abrun = ABRun(plan, state.thresholds, state.noise(), state.design, sides, options.out,
                  options.cache_dir, options.progress,
                  Profiler(plan, options.out, options.profiling, options.progress),
                  rounds=state.rounds_done)
    options.progress(f"resuming after {state.rounds_done} rounds: {state.design.description}")
    return _finish(abrun, state)


def _finish(abrun: ABRun, state: ABState, *, measure: bool = True) -> ABResult:
    if measure:
        blocks(abrun, state, judge=True)
    verdict = abrun.verdict or abrun.judge()
    results = {label: abrun.results(label) for label in abrun.sides}
    for label, res in results.items():
        save_results(res, abrun.out / label / "results.json")
    state = state.after(abrun.rounds, verdict, finished=_finished(abrun, verdict))
    save_state(state, abrun.out / STATE_FILE)
    verdict = verdict.model_copy(update={
        "rounds": abrun.rounds, "notes": verdict.notes + abrun.profiler.notes
        + ([abrun.design.note] if abrun.design.note else [])
        + ([f"the sequential test can continue: gate ab --resume {abrun.out}"]
           if not state.finished else []),
        "runner_seconds": _runner_seconds(results, time.monotonic() - abrun.started,
                                          abrun.profiler)})
    return ABResult(verdict, results["base"], results["head"], abrun.design,
                    abrun.profiler.diff, state=state)


def _finished(abrun: ABRun, verdict: Verdict) -> bool:
    return decided(verdict) or abrun.rounds >= abrun.max_rounds


def decided(verdict: Verdict) -> bool:
    """Nothing more to learn: a check failed, the measurement broke, or every check passed."""
    return verdict.outcome != Outcome.INCONCLUSIVE


# ---------------------------------------------------------------- blocks and rounds


def blocks(abrun: ABRun, state: ABState | None, *, judge: bool) -> None:
    """Measure blocks until the test stops (judge) or the design's blocks are done (not)."""
    per_block = abrun.plan.ab.rounds_per_block
    while abrun.rounds < abrun.max_rounds:
        if not _fits_budget(abrun):
            break
        t0, block = time.monotonic(), abrun.blocks + 1
        try:
            stop = _block(abrun, judge)
        except SideError as exc:
            _record_error(abrun, exc)
            if judge:
                abrun.judge()
            return
        abrun.progress(f"block {block} of at most {abrun.max_rounds // per_block} "
                       f"done in {time.monotonic() - t0:.0f} s")
        if state is not None:
            save_state(state.after(abrun.rounds, abrun.verdict, finished=False),
                       abrun.out / STATE_FILE)
        if stop or abrun.rounds % per_block:
            return


def _block(abrun: ABRun, judge: bool) -> bool:
    """One block; True when the verdict is decided (the A/B stops)."""
    if abrun.plan.ab.servers == "persistent":
        return _persistent_block(abrun, judge)
    return _per_round_block(abrun, judge)


def split_cpus(label: str, block: int, cpus: set[int] | None = None) -> tuple[int, ...]:
    """ab.isolation split: the half of the gate's CPUs this build's server gets in this block
    (0-based). The halves swap every block, so neither build always has the same cores."""
    every = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    if len(every) < 2:
        raise GateError("ab.isolation split needs at least 2 CPUs (this runner has "
                        f"{len(every)}): use shared or paused")
    half = len(every) // 2
    first = (label == "base") == (block % 2 == 0)
    return tuple(every[:half] if first else every[half:])


def _start_order(abrun: ABRun) -> tuple[str, str]:
    """Which build's server starts (and warms up) first: it swaps every block, so a start-order
    effect lands on both builds alike."""
    return ("base", "head") if abrun.blocks % 2 == 0 else ("head", "base")


def _persistent_block(abrun: ABRun, judge: bool) -> bool:
    started = time.monotonic()
    name = f"block{abrun.blocks + 1}"
    with contextlib.ExitStack() as stack:
        launched = {}
        for label in _start_order(abrun):  # both start before either is waited for
            side = abrun.sides[label]
            with abrun.blame(side):
                launched[label] = start_server(abrun.plan, abrun.launch(side, name), side.info,
                                               abrun.progress)
            stack.callback(launched[label].server.stop)
        sessions = {}
        for label in _start_order(abrun):
            side = abrun.sides[label]
            with abrun.blame(side):
                sessions[label] = stack.enter_context(open_measured_build(
                    abrun.plan, abrun.launch(side, name), side.info, abrun.progress,
                    launched[label]))
            side.sessions.append(sessions[label])
        _refuse_other_runner(abrun)
        measured = 0.0
        stop = False
        for _ in range(abrun.plan.ab.rounds_per_block):
            t0 = time.monotonic()
            _alternating_round(abrun, sessions["base"], sessions["head"])
            measured += time.monotonic() - t0
            stop = _after_round(abrun, judge, time.monotonic() - t0)
            if stop:
                break
        profiled = abrun.profiler.seconds
        if abrun.verdict is not None and _last_block(abrun, stop):
            abrun.profiler.maybe(abrun.verdict, sessions, roots=abrun.source_roots())
        measured += abrun.profiler.seconds - profiled
    abrun.pair_s.append(time.monotonic() - started - measured)
    return stop


def _alternating_round(abrun: ABRun, base: MeasuredBuild, head: MeasuredBuild) -> None:
    """One round: every cell on both builds, next to each other. Which build goes first flips
    from cell to cell and, for each cell, from round to round (ABBA per cell: a cell's build
    order is never the same in two rounds of a block); with ab.isolation paused, the other
    build's server is stopped while one measures."""
    r = abrun.rounds
    abrun.progress(f"A/B round {r + 1} of at most {abrun.max_rounds}")
    order = cell_order(abrun.plan)
    pause = abrun.plan.ab.isolation == "paused"
    for cell in cells_for_repeat(abrun.plan, r):
        first = (r + order[_identity(cell)]) % 2 == 0
        for session, other in ((base, head), (head, base)) if first else ((head, base),
                                                                         (base, head)):
            with abrun.blame(abrun.sides[session.label]), \
                    paused(other.server_pid if pause else None):
                session.measure(cell)


def _identity(cell) -> tuple[str, str, int]:
    return cell.key.phase, cell.key.arm, cell.key.concurrency


def cell_order(plan: Plan) -> dict[tuple[str, str, int], int]:
    """A stable index per cell (its place in round 1): the build order of a cell depends on
    it and the round only, not on where the interleaved sweep puts the cell in a round."""
    return {_identity(c): i for i, c in enumerate(cells_for_repeat(plan, 0))}


def _per_round_block(abrun: ABRun, judge: bool) -> bool:
    stop = False
    for _ in range(abrun.plan.ab.rounds_per_block):
        r = abrun.rounds
        abrun.progress(f"A/B round {r + 1} of at most {abrun.max_rounds}")
        measured, started = 0.0, time.monotonic()
        for label in ("base", "head") if r % 2 == 0 else ("head", "base"):
            side = abrun.sides[label]
            with abrun.blame(side), open_measured_build(
                    abrun.plan, abrun.launch(side, f"round{r + 1}"), side.info,
                    abrun.progress) as session:
                side.sessions.append(session)
                _refuse_other_runner(abrun)
                t0 = time.monotonic()
                for cell in cells_for_repeat(abrun.plan, r):
                    session.measure(cell)
                measured += time.monotonic() - t0
        abrun.pair_s.append(time.monotonic() - started - measured)
        stop = _after_round(abrun, judge, measured)
        if stop:
            break
    if abrun.verdict is not None and _last_block(abrun, stop):
        _profile_fresh_pair(abrun)
    return stop


def _after_round(abrun: ABRun, judge: bool, seconds: float) -> bool:
    abrun.rounds += 1
    abrun.round_s.append(seconds)
    if not judge:
        return False
    verdict = abrun.judge()
    abrun.progress(f"after round {abrun.rounds}: {verdict.headline}")
    return abrun.rounds >= abrun.plan.ab.min_rounds and decided(verdict)


def _last_block(abrun: ABRun, stop: bool) -> bool:
    """Whether no block follows this one (decided, the design's last, or the budget's)."""
    return stop or abrun.rounds >= abrun.max_rounds or not _fits_budget(abrun, quiet=True)


def fits_budget(elapsed_s: float, block_s: float | None, budget_minutes: float | None) -> bool:
    """Whether another block of `block_s` (the calibration's cost) ends within the budget."""
    if budget_minutes is None or block_s is None:
        return True
    return elapsed_s + block_s <= budget_minutes * 60


def _fits_budget(abrun: ABRun, quiet: bool = False) -> bool:
    budget = abrun.plan.ab.budget_minutes
    block_s = abrun.design.block_s or _measured_block_s(abrun)  # from nothing: its own blocks
    if fits_budget(time.monotonic() - abrun.started, block_s, budget):
        return True
    if not quiet:
        abrun.progress(f"budget of {budget:g} min: another block (about {block_s:.0f} s) would "
                       f"not fit; stopping (gate ab --resume {abrun.out} continues this test)")
    return False


def _measured_block_s(abrun: ABRun) -> float | None:
    """A block's cost as this A/B's own blocks measured it (no calibration gave one)."""
    cost = abrun.cost()
    if cost is None:
        return None
    return RunnerCost(cost.pair_s, cost.round_s, abrun.plan.ab.servers == "per_round").block_s(
        abrun.plan.ab.rounds_per_block)


def _record_error(abrun: ABRun, exc: SideError) -> None:
    for label in (("base", "head") if exc.side == "both" else (exc.side,)):
        abrun.sides[label].errors.append(str(exc))
    abrun.progress(f"measurement error on {exc.side}: {str(exc).splitlines()[0]}")


# ---------------------------------------------------------------- profiling


class Profiler:
    """Profiles both builds once the verdict is known, on servers that are still up, and
    diffs them; a failure to profile is a note, never a change of the verdict."""

    def __init__(self, plan: Plan, out: Path, profiling: Profiling, progress: Progress):
        self.plan, self.out, self.profiling, self.progress = plan, out, profiling, progress
        self.diff: ProfileDiff | None = None
        self.notes: list[str] = []
        self.seconds = 0.0

    def maybe(self, verdict: Verdict, sessions: dict[str, MeasuredBuild], *,
              roots: dict[str, list[Path]]) -> None:
        if verdict.outcome != Outcome.ERROR and should_profile(
                self.profiling.policy, [c.outcome for c in verdict.checks]):
            self.run(sessions, roots=roots)

    def sampling(self) -> SamplingOptions:
        """The command line's rate, the plan's windows (a plan knows how long its step is)."""
        spec = self.plan.profile
        return replace(self.profiling.options, windows=spec.windows,
                                   window_s=spec.window_s, settle_s=spec.settle_s)

    def run(self, sessions: dict[str, MeasuredBuild], *, roots: dict[str, list[Path]]) -> None:
        """Profile both builds' servers and diff them. `roots`: each build's source root (the
        folder that holds its vllm package), so that both builds' frames are named vllm/..."""
        started = time.monotonic()
        try:
            profiles = {}
            for label in ("base", "head"):
                s = sessions[label]
                self.progress(f"{label}: profiling the serving processes (py-spy)")
                target = ProfileTarget(s.base_url, label=label, pid=s.server_pid)
                profiles[label] = profile_server(
                    target, self.plan, self.out / label / "profile", self.sampling(),
                    roots=roots.get(label, []), log=self.progress)
            pair = ProfilePair(profiles["base"], profiles["head"], self.out / "base" / "profile",
                               self.out / "head" / "profile")
            written = write_diff(pair, self.out / "profile-diff", self.profiling.diff,
                                 hunkset=self.profiling.hunkset)
            self.diff = written.diff
            self.progress("profile diff:\n" + written.table)
        except (GateError, MeasurementError) as exc:
            self.notes.append(f"no profile diff: {str(exc).splitlines()[0]}")
            self.progress(f"profiling failed: {exc}")
        self.seconds += time.monotonic() - started


def _profile_fresh_pair(abrun: ABRun) -> None:
    """per_round servers are gone after their round: one more server per build, to profile."""
    verdict = abrun.verdict
    assert verdict is not None
    profiler = abrun.profiler
    if verdict.outcome == Outcome.ERROR or not should_profile(
            profiler.profiling.policy, [c.outcome for c in verdict.checks]):
        return
    with contextlib.ExitStack() as stack:
        try:
            sessions = {label: stack.enter_context(open_measured_build(
                abrun.plan, abrun.launch(side, "profile-server"),
                ServerInfo(base_url="", started_by_gate=True, model=""), abrun.progress))
                for label, side in abrun.sides.items()}
        except MeasurementError as exc:
            profiler.notes.append(f"no profile diff: {str(exc).splitlines()[0]}")
        else:
            profiler.run(sessions, roots=abrun.source_roots())


def _runner_seconds(results: dict[str, Results], wall_s: float, profiler: Profiler
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
