"""What a plan costs on its runner, computed from the plan itself: its cells, its warm-up, its
A/B mode, and what it expects (`workload.expected`: the seconds a guided request spends in the
server at the plan's top concurrency, R, and the start of one server, S). The figures of
docs/runner-time.md#tiers-and-runner-time come from here (a test keeps them equal).

Every request is taken to last R, which is the request time at the highest concurrency: at lower
concurrency requests finish sooner, so each figure is an upper bound. Doctor and shutdown
(seconds) are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gate.core.errors import GateError
from gate.plan.spec import Plan


@dataclass(frozen=True)
class BuildRound:
    """One build in one round: its warm-up (once per server) and its measured cells."""

    warmup_s: float
    drain_s: float
    sweep_s: float

    @property
    def cells_s(self) -> float:
        return self.drain_s + self.sweep_s


@dataclass(frozen=True)
class Estimate:
    request_s: float
    startup_s: float
    build: BuildRound
    servers: str  # the plan's ab.servers

    def ab_s(self, rounds: int) -> float:
        """An A/B of `rounds` rounds: per_round starts and warms two servers every round;
        persistent starts and warms them once."""
        if self.servers == "per_round":
            return rounds * 2 * (self.startup_s + self.build.warmup_s + self.build.cells_s)
        return 2 * (self.startup_s + self.build.warmup_s) + rounds * 2 * self.build.cells_s

    def run_s(self, repeats: int = 1) -> float:
        """One build alone (`gate run`, the nightly baseline), `repeats` times its cells."""
        return self.startup_s + self.build.warmup_s + repeats * self.build.cells_s


def cell_s(window_s: float, factor: int, max_window_s: float, request_s: float) -> float:
    """A steady-state window: warm-in until the first request completes (R), the window (its
    length, or as long as `factor` requests per slot take to be sent: factor x R), capped at
    max_window_s, and the tail of the last measured request (R)."""
    window = min(max_window_s, max(window_s, factor * request_s))
    return request_s + window + request_s


def build_round(plan: Plan, request_s: float) -> BuildRound:
    warm = plan.warmup
    batches = ([(warm.concurrency, warm.requests)] if warm.requests else []) + \
        [(level, level) for level in warm.levels]
    warmup = 2 * sum(math.ceil(n / c) for c, n in batches) * request_s  # both arms
    drain = 0.0
    if plan.drain.enabled:
        d = plan.drain
        drain = (d.requests / d.concurrency * request_s if d.window_s is None else
                 cell_s(d.window_s, math.ceil(d.requests / d.concurrency), d.max_window_s,
                        request_s))
    sweep = 0.0
    if plan.sweep.enabled:
        s = plan.sweep
        sweep = len(s.arms) * sum(cell_s(s.window_at(level), s.min_requests_factor,
                                         s.max_window_s, request_s) for level in s.levels)
    return BuildRound(warmup, drain, sweep)


def estimate(plan: Plan) -> Estimate:
    """The plan's cost from its own expectations; a GateError when it states none."""
    expected = plan.workload.expected
    if expected.request_s is None or expected.startup_s is None:
        raise GateError(f"plan {plan.name!r} states no workload.expected.request_s and "
                        "startup_s: its runner time cannot be computed")
    return Estimate(expected.request_s, expected.startup_s, build_round(plan, expected.request_s),
                plan.ab.servers)
