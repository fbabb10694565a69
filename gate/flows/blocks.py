"""Paired blocks: the measuring `gate ab` and `gate calibrate` share (docs/compare.md, "The A/B
design").

A round measures every cell of the plan once on each build, adjacent in time. A block is
`ab.rounds_per_block` rounds:

- `ab.servers: persistent` (the CPU plan): one server pair for the block, both started before
  either is waited for (which starts first swaps every block), the builds alternating cell by
  cell, so drift of the machine lands on both alike; the pair is stopped at the block's end, so
  that each block carries its own server offset;
- `ab.servers: per_round` (GPU plans, where two servers do not fit): a fresh server per build
  and round, one at a time.

Which build goes first flips from cell to cell and, for each cell, from round to round (ABBA).
What each server pair and each round took is recorded (`Costs`: what a block costs, when no
calibration says). What the caller does after each round (gate ab judges the rounds so far and
may stop there) and at the block's end (gate ab profiles both builds after its last block) is
passed in; a calibration measures its blocks with neither. A measurement that breaks ends the
block, and its end names the side (SideError).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gate.core.errors import GateError
from gate.core.progress import Progress
from gate.flows.sides import Side, SideError, blame, refuse_other_runner
from gate.judge.checks import cells_read
from gate.judge.noise import CalibrationCost
from gate.judge.sizing import RunnerCost
from gate.measure.measured_build import (
    Cell,
    Launch,
    MeasuredBuild,
    cells_for_repeat,
    open_measured_build,
    start_server,
)
from gate.measure.results import CellKey, Results
from gate.measure.server import paused
from gate.plan.spec import Plan
from gate.plan.thresholds import Thresholds


@dataclass(frozen=True, kw_only=True)
class Pairing:
    """The two sides measured together and where their servers run: fixed for a whole A/B or
    calibration."""

    plan: Plan
    thresholds: Thresholds  # with ab.cells judged, which cells a round measures
    sides: dict[str, Side]
    cache_dir: Path
    progress: Progress

    def cells(self, r: int) -> list[Cell]:
        """Round `r`'s cells (0-based)."""
        return round_cells(self.plan, self.thresholds, r)

    def launch(self, side: Side, server_dir: str, *, block: int) -> Launch:
        """How `side`'s server starts in `block` (0-based): with ab.isolation split, bound to
        this block's half of the CPUs."""
        cpus = split_cpus(side.label, block) if self.plan.ab.isolation == "split" else None
        env = dict(side.build.env)
        if cpus is not None:  # vLLM's CPU worker binds its OpenMP threads to these
            env.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(str(c) for c in cpus))
        return Launch(label=side.label, out=side.out / server_dir, cache_dir=self.cache_dir,
                      python=side.build.python, env=env, cpus=cpus)

    def results(self, *, rounds: int, max_rounds: int) -> dict[str, Results]:
        """Each side's results of the `rounds` measured so far, of at most `max_rounds`."""
        return {label: side.results(self.plan, rounds=rounds, max_rounds=max_rounds)
                for label, side in self.sides.items()}

    def record(self, error: SideError) -> None:
        """A broken measurement, in its side's errors (in both sides' when it is both's)."""
        for label in (("base", "head") if error.side == "both" else (error.side,)):
            self.sides[label].errors.append(str(error))
        self.progress(f"measurement error on {error.side}: {str(error).splitlines()[0]}")


@dataclass
class Costs:
    """What this run's server pairs and rounds took, in runner seconds, both builds together."""

    pair_s: list[float] = field(default_factory=list)
    round_s: list[float] = field(default_factory=list)

    def cost(self) -> CalibrationCost | None:
        if not self.pair_s or not self.round_s:
            return None
        # The first pair of a run may start on cold compile caches (a build's first start
        # takes minutes longer): priced from the pairs after it when there are any.
        pairs = self.pair_s[1:] or self.pair_s
        return CalibrationCost(pair_s=sum(pairs) / len(pairs),
                               round_s=sum(self.round_s) / len(self.round_s))

    def block_s(self, plan: Plan) -> float | None:
        """A block's runner seconds as this run's own blocks measured it (None: none yet)."""
        cost = self.cost()
        if cost is None:
            return None
        return RunnerCost(cost.pair_s, cost.round_s, plan.ab.servers == "per_round").block_s(
            plan.ab.rounds_per_block)


@dataclass
class BlockEnd:
    """How a block ended: the rounds measured so far (earlier blocks' included), whether the
    look after a round stopped it, and the broken measurement that ended it, if one did."""

    rounds: int
    stopped: bool = False
    error: SideError | None = None


AfterRound = Callable[[int], bool]  # the rounds measured so far -> True: stop after this round
# At the block's end, after its last round: its servers while they are still up (persistent),
# None when they are gone (per_round).
AtEnd = Callable[[BlockEnd, dict[str, MeasuredBuild] | None], None]


def never_stop(rounds: int) -> bool:
    return False


def measure_block(pairing: Pairing, costs: Costs, *, rounds: int, max_rounds: int,
                  after_round: AfterRound = never_stop, at_end: AtEnd | None = None
                  ) -> BlockEnd:
    """The block that follows `rounds` rounds (of at most `max_rounds`), what its pairs and
    rounds took added to `costs`; how it ended."""
    started = time.monotonic()
    per_block = pairing.plan.ab.rounds_per_block
    end = BlockEnd(rounds=rounds)
    block = _persistent_block if pairing.plan.ab.servers == "persistent" else _per_round_block
    try:
        block(pairing, costs, end=end, max_rounds=max_rounds, after_round=after_round,
              at_end=at_end)
    except SideError as exc:
        end.error = exc
        return end
    pairing.progress(f"block {rounds // per_block + 1} of at most {max_rounds // per_block} "
                     f"done in {time.monotonic() - started:.0f} s")
    return end


def _round_done(end: BlockEnd, costs: Costs, *, seconds: float, after_round: AfterRound
                ) -> None:
    costs.round_s.append(seconds)
    end.rounds += 1
    end.stopped = after_round(end.rounds)


# ---------------------------------------------------------------- ab.servers: persistent


def _persistent_block(pairing: Pairing, costs: Costs, *, end: BlockEnd, max_rounds: int,
                      after_round: AfterRound, at_end: AtEnd | None) -> None:
    """Both servers up for the block; its pair's cost: the block's time outside the rounds
    (the end's look, a profile, is not the pair's)."""
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        servers = _pair_up(pairing, stack, block=end.rounds // pairing.plan.ab.rounds_per_block)
        measured = 0.0
        for _ in range(pairing.plan.ab.rounds_per_block):
            t0 = time.monotonic()
            _alternating_round(pairing, servers, r=end.rounds, max_rounds=max_rounds)
            seconds = time.monotonic() - t0
            measured += seconds
            _round_done(end, costs, seconds=seconds, after_round=after_round)
            if end.stopped:
                break
        t0 = time.monotonic()
        if at_end is not None:
            at_end(end, servers)
        measured += time.monotonic() - t0
    costs.pair_s.append(time.monotonic() - started - measured)


def start_order(block: int) -> tuple[str, str]:
    """Which build's server starts (and warms up) first: it swaps every block, so a start-order
    effect lands on both builds alike."""
    return ("base", "head") if block % 2 == 0 else ("head", "base")


def _pair_up(pairing: Pairing, stack: contextlib.ExitStack, *, block: int
             ) -> dict[str, MeasuredBuild]:
    """The block's server pair, stopped on every way out of `stack`: both start before either
    is waited for, so that their start-ups overlap."""
    name = f"block{block + 1}"
    launched = {}
    for label in start_order(block):
        side = pairing.sides[label]
        with blame(side):
            launched[label] = start_server(pairing.plan, pairing.launch(side, name, block=block),
                                           side.info, pairing.progress)
        stack.callback(launched[label].server.stop)
    servers = {}
    for label in start_order(block):
        side = pairing.sides[label]
        with blame(side):
            servers[label] = stack.enter_context(open_measured_build(
                pairing.plan, pairing.launch(side, name, block=block), side.info,
                pairing.progress, started=launched[label]))
        side.measured.append(servers[label])
    refuse_other_runner(pairing.sides)
    return servers


def _alternating_round(pairing: Pairing, servers: dict[str, MeasuredBuild], *, r: int,
                       max_rounds: int) -> None:
    """Round `r` (0-based): every cell on both builds, next to each other. Which build goes
    first flips from cell to cell and, for each cell, from round to round (ABBA per cell: a
    cell's build order is never the same in two rounds of a block); with ab.isolation paused,
    the other build's server is stopped while one measures."""
    pairing.progress(f"A/B round {r + 1} of at most {max_rounds}")
    order = cell_order(pairing.cells(0))
    pause = pairing.plan.ab.isolation == "paused"
    base, head = servers["base"], servers["head"]
    for cell in pairing.cells(r):
        first = (r + order[_identity(cell)]) % 2 == 0
        for measured, other in ((base, head), (head, base)) if first else ((head, base),
                                                                         (base, head)):
            with blame(pairing.sides[measured.label]), \
                    paused(other.server_pid if pause else None):
                measured.measure(cell)


def _identity(cell: Cell) -> tuple[str, str, int]:
    return _identity_of(cell.key)


def cell_order(first_round: list[Cell]) -> dict[tuple[str, str, int], int]:
    """A stable index per cell (its place in round 1): the build order of a cell depends on
    it and the round only, not on where the interleaved sweep puts the cell in a round."""
    return {_identity(c): i for i, c in enumerate(first_round)}


def round_cells(plan: Plan, thresholds: Thresholds, r: int) -> list[Cell]:
    """The cells of an A/B or calibration round (0-based `r`). With ab.cells judged: only those
    a judged check reads, and the sweep's guided cell at the drain's concurrency measured in
    the drain's window when their windows follow the same rule: the same condition, which two
    windows a round measured twice with noise of each window's own (docs/compare.md, "What a
    round measures")."""
    cells = cells_for_repeat(plan, r)
    if plan.ab.cells == "all":
        return cells
    read = cells_read(plan, thresholds)
    twin = _drain_twin(plan, r)
    if twin is not None and not {("drain", "guided", plan.drain.concurrency),
                                 _identity_of(twin)} <= read:
        twin = None  # one of the two is not judged: the other is measured on its own
    return [dataclasses.replace(cell, also=twin) if cell.key.phase == "drain" else cell
            for cell in cells if _identity(cell) in read and cell.key != twin]


def _identity_of(key: CellKey) -> tuple[str, str, int]:
    return key.phase, key.arm, key.concurrency


def _drain_twin(plan: Plan, r: int) -> CellKey | None:
    """The sweep cell that the drain's window can stand for: guided, at the drain's
    concurrency, a window of the same length, at least as many requests, the same cap."""
    drain, sweep = plan.drain, plan.sweep
    level = drain.concurrency
    if not (drain.enabled and sweep.enabled and drain.window_s is not None
            and "guided" in sweep.arms and level in sweep.levels):
        return None
    alike = (drain.window_s == sweep.window_at(level)
             and drain.requests >= sweep.min_requests_factor * level
             and max(drain.max_window_s, drain.window_s) == sweep.max_window_s)
    return CellKey("sweep", "guided", level, r) if alike else None


def split_cpus(label: str, block: int, *, cpus: set[int] | None = None) -> tuple[int, ...]:
    """ab.isolation split: the half of the gate's CPUs this build's server gets in this block
    (0-based). The halves swap every block, so neither build always has the same cores."""
    every = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    if len(every) < 2:
        raise GateError("ab.isolation split needs at least 2 CPUs (this runner has "
                        f"{len(every)}): use shared or paused")
    half = len(every) // 2
    first = (label == "base") == (block % 2 == 0)
    return tuple(every[:half] if first else every[half:])


# ---------------------------------------------------------------- ab.servers: per_round


def _per_round_block(pairing: Pairing, costs: Costs, *, end: BlockEnd, max_rounds: int,
                     after_round: AfterRound, at_end: AtEnd | None) -> None:
    """A fresh server per build and round; each round's pair cost: its time outside the
    cells."""
    for _ in range(pairing.plan.ab.rounds_per_block):
        started = time.monotonic()
        measured = _fresh_round(pairing, r=end.rounds, max_rounds=max_rounds)
        costs.pair_s.append(time.monotonic() - started - measured)
        _round_done(end, costs, seconds=measured, after_round=after_round)
        if end.stopped:
            break
    if at_end is not None:
        at_end(end, None)


def _fresh_round(pairing: Pairing, *, r: int, max_rounds: int) -> float:
    """Round `r` (0-based), each build on a server of its own, one after the other (which one
    first flips every round); the seconds its cells took."""
    pairing.progress(f"A/B round {r + 1} of at most {max_rounds}")
    block = r // pairing.plan.ab.rounds_per_block
    seconds = 0.0
    for label in ("base", "head") if r % 2 == 0 else ("head", "base"):
        side = pairing.sides[label]
        with blame(side), open_measured_build(
                pairing.plan, pairing.launch(side, f"round{r + 1}", block=block), side.info,
                pairing.progress) as measured:
            side.measured.append(measured)
            refuse_other_runner(pairing.sides)
            t0 = time.monotonic()
            for cell in pairing.cells(r):
                measured.measure(cell)
            seconds += time.monotonic() - t0
    return seconds
