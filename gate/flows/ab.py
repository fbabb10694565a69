"""`gate ab`: measure the base and the PR build on the same runner in blocks of rounds, and stop
as soon as the sequential test decides (docs/compare.md, "The A/B design").

Before the first round the design is fixed (gate.judge.ab_design): sized by the runner's
calibration when one applies, else the plan's limits, the test then learning the runner's
noise from its own blocks; when none can start here (no check to judge, a budget that holds no
block, a calibration asked for and none found), that is the A/B's outcome, before anything is
measured. Then paired blocks (gate.flows.blocks: a server pair up, rounds in ABBA order, the
pair down) are measured, and after every round the rounds so far are judged (gate.judge
.compare); the A/B stops when the verdict is decided, when the measurement breaks, at the
design's last block, or before a block that would end past the budget. After the last block
both builds are profiled when the verdict asks for it. `OUT/ab-state.json` keeps the design,
so `resume` adds blocks to the same sequential test instead of starting a new one.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from gate.core.errors import GateError, MeasurementError
from gate.core.progress import Progress
from gate.evidence.hunks import HunkSet
from gate.flows.ab_state import (
    STATE_FILE,
    ABState,
    BuildIdentity,
    FixedDesign,
    load_state,
    save_state,
)
from gate.flows.blocks import BlockEnd, Costs, Pairing, measure_block
from gate.flows.diff_artifacts import ProfilePair, write_diff
from gate.flows.sides import Build, Side, make_side, origin_problems, shared_gpu_problem
from gate.judge.ab_design import NoDesign, design_ab
from gate.judge.compare import ABReference, compare_results
from gate.judge.noise import Noise, noise_dirs, noise_for, runner_key
from gate.judge.verdict import Outcome, Verdict
from gate.measure.measured_build import MeasuredBuild, open_measured_build
from gate.measure.results import Results, ServerInfo, load_results, save_results
from gate.plan.spec import Plan
from gate.plan.thresholds import Thresholds
from gate.profile.diff_file import DiffSettings, ProfileDiff
from gate.profile.sampling import SamplingOptions, find_py_spy, should_profile
from gate.profile.traffic import ProfileTarget, profile_server


@dataclass
class Profiling:
    """When and how to profile both builds after the rounds (gate.profile.sampling)."""

    policy: str = "auto"  # always, never, auto: when a check failed or is inconclusive
    options: SamplingOptions = field(default_factory=SamplingOptions)
    diff: DiffSettings = field(default_factory=DiffSettings)
    # what changed between the builds (two releases: gate.evidence.release_diff), ranked by
    # the profile diff
    hunkset: HunkSet | None = None


@dataclass(kw_only=True)
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


@dataclass(kw_only=True)
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


@dataclass(kw_only=True)
class ABResult:
    verdict: Verdict
    base: Results
    head: Results
    design: FixedDesign
    profile: ProfileDiff | None = None
    state: ABState | None = None  # the test as saved in ab-state.json: rounds, finished


@dataclass(frozen=True, kw_only=True)
class ABSetup:
    """What is fixed for one A/B: its paired sides, the thresholds, noise and design it is
    judged by, and where its files go."""

    pairing: Pairing
    thresholds: Thresholds
    noise: Noise
    design: FixedDesign
    out: Path

    @property
    def plan(self) -> Plan:
        return self.pairing.plan

    @property
    def progress(self) -> Progress:
        return self.pairing.progress


@dataclass(kw_only=True)
class Tally:
    """What the A/B measured so far: its rounds (an earlier run's included), the verdict on
    them, what this run's server pairs and rounds took, its profiles, and when it started."""

    profiler: Profiler
    rounds: int = 0
    verdict: Verdict | None = None
    costs: Costs = field(default_factory=Costs)
    started: float = field(default_factory=time.monotonic)


# ---------------------------------------------------------------- the entry points


def ab(options: ABOptions) -> ABResult | NoDesign:
    """Run one A/B from its first round: fix the design (from the runner's calibration, or the
    plan's limits when none applies), then measure blocks until decided. NoDesign: no A/B can
    start here, said before anything is measured."""
    plan, thresholds = options.plan, options.thresholds or options.plan.thresholds
    sides = {b.label: make_side(plan, b, out=options.out, cache_dir=options.cache_dir)
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
    setup = ABSetup(pairing=Pairing(plan=plan, thresholds=thresholds, sides=sides,
                                    cache_dir=options.cache_dir, progress=options.progress),
                    thresholds=thresholds, noise=noise, design=design, out=options.out)
    tally = Tally(profiler=Profiler(plan=plan, out=options.out, profiling=options.profiling,
                                    progress=options.progress))
    state = _start_state(setup, started_in=options.started_in)
    if refused:
        options.progress("not measured: " + "; ".join(refused))
    return _finish(setup, tally, state=state, measure=not refused)


def _start_state(setup: ABSetup, *, started_in: str | None) -> ABState:
    """The state of a test that starts now: what it fixed, and which builds it measures."""
    sides = setup.pairing.sides
    return ABState(
        plan=setup.plan.name, plan_hash=setup.plan.measurement_hash(),
        runner_key=runner_key(sides["head"].fingerprint), thresholds=setup.thresholds,
        design=setup.design, calibrations=list(setup.noise.calibrations),
        noise_description=setup.noise.description,
        builds={label: BuildIdentity.of(s.build.python, s.build.env, s.fingerprint)
                for label, s in sides.items()},
        started_in=started_in)


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
    builds = {label: given[label] or Build(label=label, python=state.builds[label].python,
                                           env=state.builds[label].env) for label in given}
    sides = {label: make_side(plan, b, out=options.out, cache_dir=options.cache_dir)
             for label, b in builds.items()}
    state.check_resumable(plan, earlier, {label: s.fingerprint for label, s in sides.items()})
    for label, side in sides.items():
        side.earlier = earlier[label]
    setup = ABSetup(pairing=Pairing(plan=plan, thresholds=state.thresholds, sides=sides,
                                    cache_dir=options.cache_dir, progress=options.progress),
                    thresholds=state.thresholds, noise=state.noise(), design=state.design,
                    out=options.out)
    tally = Tally(profiler=Profiler(plan=plan, out=options.out, profiling=options.profiling,
                                    progress=options.progress), rounds=state.rounds_done)
    options.progress(f"resuming after {state.rounds_done} rounds: {state.design.description}")
    return _finish(setup, tally, state=state)


def _finish(setup: ABSetup, tally: Tally, *, state: ABState, measure: bool = True) -> ABResult:
    """Measure (unless refused), then write both results, the test's state and the verdict's
    notes: what profiling said, the design's note, whether the test can go on, where the
    runner's time went."""
    if measure:
        _measure(setup, tally, state=state)
    verdict = tally.verdict or _judge(setup, rounds=tally.rounds)
    results = setup.pairing.results(rounds=tally.rounds, max_rounds=setup.design.max_rounds)
    for label, res in results.items():
        save_results(res, setup.out / label / "results.json")
    state = state.after(tally.rounds, verdict, finished=decided(verdict)
                        or tally.rounds >= setup.design.max_rounds)
    save_state(state, setup.out / STATE_FILE)
    profiler = tally.profiler
    verdict = verdict.model_copy(update={
        "rounds": tally.rounds, "notes": verdict.notes + profiler.notes
        + ([setup.design.note] if setup.design.note else [])
        + ([f"the sequential test can continue: gate ab --resume {setup.out}"]
           if not state.finished else []),
        "runner_seconds": _runner_seconds(results, wall_s=time.monotonic() - tally.started,
                                          profile_s=profiler.seconds)})
    return ABResult(verdict=verdict, base=results["base"], head=results["head"],
                    design=setup.design, profile=profiler.diff, state=state)


def decided(verdict: Verdict) -> bool:
    """Nothing more to learn: a check failed, the measurement broke, or every check passed."""
    return verdict.outcome != Outcome.INCONCLUSIVE


# ---------------------------------------------------------------- blocks, judged round by round


def _measure(setup: ABSetup, tally: Tally, *, state: ABState) -> None:
    """Blocks until the test stops: decided, its design's last block, a block the budget would
    not hold, or a broken measurement (the verdict then names the side). The state is saved
    after every block."""
    per_block = setup.plan.ab.rounds_per_block
    while tally.rounds < setup.design.max_rounds and _fits_budget(setup, tally):
        end = measure_block(
            setup.pairing, tally.costs, rounds=tally.rounds, max_rounds=setup.design.max_rounds,
            after_round=lambda rounds: _look(setup, tally, rounds=rounds),
            at_end=lambda ended, servers: _after_block(setup, tally, end=ended, servers=servers))
        tally.rounds = end.rounds
        if end.error is not None:
            setup.pairing.record(end.error)
            tally.verdict = _judge(setup, rounds=tally.rounds)
            return
        save_state(state.after(tally.rounds, tally.verdict, finished=False),
                   setup.out / STATE_FILE)
        if end.stopped or tally.rounds % per_block:
            return


def _look(setup: ABSetup, tally: Tally, *, rounds: int) -> bool:
    """After each round: the verdict on the rounds so far; True when it stops the A/B."""
    tally.verdict = _judge(setup, rounds=rounds)
    setup.progress(f"after round {rounds}: {tally.verdict.headline}")
    return rounds >= setup.plan.ab.min_rounds and decided(tally.verdict)


def _judge(setup: ABSetup, *, rounds: int) -> Verdict:
    results = setup.pairing.results(rounds=rounds, max_rounds=setup.design.max_rounds)
    base_path = str(setup.out / "base" / "results.json")
    return compare_results(
        results["head"], ABReference(results["base"], base_path), setup.thresholds,
        noise=setup.noise, head_path=str(setup.out / "head" / "results.json"))


def fits_budget(elapsed_s: float, block_s: float | None, *, budget_minutes: float | None
                ) -> bool:
    """Whether another block of `block_s` (the calibration's cost) ends within the budget."""
    if budget_minutes is None or block_s is None:
        return True
    return elapsed_s + block_s <= budget_minutes * 60


def _fits_budget(setup: ABSetup, tally: Tally, *, quiet: bool = False) -> bool:
    budget = setup.plan.ab.budget_minutes
    # from nothing, a block costs what this A/B's own blocks took
    block_s = setup.design.block_s or tally.costs.block_s(setup.plan)
    if fits_budget(time.monotonic() - tally.started, block_s, budget_minutes=budget):
        return True
    if not quiet:
        setup.progress(f"budget of {budget:g} min: another block (about {block_s:.0f} s) would "
                       f"not fit; stopping (gate ab --resume {setup.out} continues this test)")
    return False


# ---------------------------------------------------------------- profiling after the last block


def _after_block(setup: ABSetup, tally: Tally, *, end: BlockEnd,
                 servers: dict[str, MeasuredBuild] | None) -> None:
    """After the test's last block (decided, the design's last, or the budget's), profile both
    builds when the verdict asks for it: on the block's servers while they are up, else on a
    fresh pair (per_round servers are gone after their round)."""
    verdict = tally.verdict
    last = end.stopped or end.rounds >= setup.design.max_rounds \
        or not _fits_budget(setup, tally, quiet=True)
    if verdict is None or not last or not tally.profiler.wanted(verdict):
        return
    roots = source_roots(setup.pairing.sides)
    if servers is not None:
        tally.profiler.run(servers, roots=roots)
        return
    try:
        find_py_spy()  # without it, say so before two servers are loaded for nothing
    except GateError as exc:
        tally.profiler.notes.append(f"no profile diff: {exc}")
        return
    block = end.rounds // setup.plan.ab.rounds_per_block
    with contextlib.ExitStack() as stack:
        try:
            fresh = {label: stack.enter_context(open_measured_build(
                setup.plan, setup.pairing.launch(side, "profile-server", block=block),
                ServerInfo(base_url="", started_by_gate=True, model=""), setup.progress))
                for label, side in setup.pairing.sides.items()}
        except MeasurementError as exc:
            tally.profiler.notes.append(f"no profile diff: {str(exc).splitlines()[0]}")
        else:
            tally.profiler.run(fresh, roots=roots)


def source_roots(sides: dict[str, Side]) -> dict[str, list[Path]]:
    """The folder above each build's vllm package, where its interpreter imports it from:
    a commit's overlay or a source checkout is outside site-packages, and its frames must
    be named as the other build's are (vllm/...) for the two profiles to meet."""
    return {label: [Path(side.fingerprint.vllm_origin.path).parent]
            if side.fingerprint.vllm_origin else [] for label, side in sides.items()}


@dataclass(kw_only=True)
class Profiler:
    """Profiles both builds once the verdict is known, on servers that are still up, and
    diffs them; a failure to profile is a note, never a change of the verdict."""

    plan: Plan
    out: Path
    profiling: Profiling
    progress: Progress
    diff: ProfileDiff | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def wanted(self, verdict: Verdict) -> bool:
        return verdict.outcome != Outcome.ERROR and should_profile(
            self.profiling.policy, [c.outcome for c in verdict.checks])

    def sampling(self) -> SamplingOptions:
        """The command line's rate, the plan's windows (a plan knows how long its step is)."""
        spec = self.plan.profile
        return replace(self.profiling.options, windows=spec.windows,
                       window_s=spec.window_s, settle_s=spec.settle_s)

    def run(self, servers: dict[str, MeasuredBuild], *, roots: dict[str, list[Path]]) -> None:
        """Profile both builds' servers and diff them. `roots`: each build's source root (the
        folder that holds its vllm package), so that both builds' frames are named vllm/..."""
        started = time.monotonic()
        try:
            profiles = {}
            for label in ("base", "head"):
                s = servers[label]
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


def _runner_seconds(results: dict[str, Results], *, wall_s: float, profile_s: float
                    ) -> dict[str, float]:
    """Where the runner's time went, summed over both builds."""
    out: dict[str, float] = {}
    for res in results.values():
        for key, value in res.timings_s.items():
            name = key.removesuffix("_s")
            out[name] = out.get(name, 0.0) + value
    if profile_s:
        out["profile"] = profile_s
    out["wall"] = wall_s
    return {k: round(v, 1) for k, v in out.items()}
