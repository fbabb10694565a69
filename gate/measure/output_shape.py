"""The workload's shape as it ran: how long the measured guided outputs were (a plan states
what it expects; gate.judge.run_validity warns when a run fell far short). Standard library
only, so that the poster's minimal install (requirements/poster.txt) can render it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from gate.measure.results import RequestRecord


@dataclass(frozen=True)
class OutputShape:
    """How long the measured guided outputs were: the workload's shape as it ran."""

    requests: int
    mean_tokens: float
    mean_chars: float


def guided_output_shape(records: Sequence[RequestRecord]) -> OutputShape | None:
    """Mean output tokens (the usage block) and characters of the completed guided requests
    of the measured cells; None when there are none."""
    done = [r for r in records if r.arm == "guided" and r.phase != "warmup" and r.ok]
    if not done:
        return None
    return OutputShape(len(done), fmean(r.output_tokens or 0 for r in done),
                       fmean(len(r.text) for r in done))
