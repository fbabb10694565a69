"""The sequential A/B look by look, as data: what each look saw and why the test stopped where
it did. gate.judge.trajectory replays the test into these (it needs numpy); the comment file
carries them to the poster (gate.github.comment_file), whose hash-pinned install has no numpy,
so they live here, on pydantic and the standard library alone. Plain dataclasses, which
pydantic validates as fields of the comment file: every field typed, unknown keys refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ConfigDict

from gate.judge.verdict import Outcome


@dataclass(frozen=True, kw_only=True)
class Look:
    __pydantic_config__ = ConfigDict(extra="forbid")  # read back from an untrusted file

    round: int
    delta_pct: float
    low_pct: float | None  # the interval's ends; None: no spread yet (the first block)
    high_pct: float | None
    outcome: Outcome
    gross: bool = False  # decided by the first block's look for gross effects


@dataclass(frozen=True, kw_only=True)
class Trajectory:
    __pydantic_config__ = ConfigDict(extra="forbid")

    check: str
    label: str
    looks: list[Look]
    threshold_pct: float  # the change at which the check fails, signed (-10: a 10% drop)
    max_rounds: int

    @property
    def why(self) -> str:
        """Why the test stopped at its last look, in one sentence."""
        last = self.looks[-1]
        seen = f"{last.delta_pct:+.1f}%" + (
            f" ({last.low_pct:+.1f}% to {last.high_pct:+.1f}%)"
            if last.low_pct is not None and last.high_pct is not None else "")
        limit = f"threshold {self.threshold_pct:+g}%"
        if last.outcome == Outcome.FAIL and last.gross:
            return (f"failed at round {last.round}: a gross effect, every round of the first "
                    f"block far past the {limit}")
        if last.outcome == Outcome.FAIL:
            return f"failed at round {last.round}: {seen}, past the {limit}"
        if last.outcome == Outcome.PASS:
            return f"passed at round {last.round}: {seen}, within the {limit}"
        if last.round >= self.max_rounds:
            return (f"undecided after {last.round} rounds, the most the design allows: {seen}, "
                    f"{limit}")
        return f"undecided after {last.round} of at most {self.max_rounds} rounds: {seen}, {limit}"
