"""Which model runner served a server: read back from vLLM's log (the plan pins one through
gate.plan.runner_pin; docs/background.md#two-model-runners)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from gate.plan.runner_pin import Runner

# Log lines that name the runner that serves. vLLM logs "Using V2 Model Runner" from the worker
# whenever V2 runs (gpu_worker.py, cpu_worker.py) and a warning when it falls back to V1; with
# V1 pinned neither appears, so the file that loads the model names it: the V1 GPU runner
# (gpu_model_runner.py) or the CPU runner that subclasses it (cpu_model_runner.py).
RUNNER_LINES: tuple[tuple[re.Pattern[str], Runner], ...] = (
    (re.compile(r"Using V2 Model Runner"), "v2"),
    (re.compile(r"using the V1 model runner instead"), "v1"),
    (re.compile(r"\[(?:gpu|cpu)_model_runner\.py:\d+\] Starting to load model"), "v1"),
)


def runner_in_line(line: str) -> Runner | None:
    for pattern, runner in RUNNER_LINES:
        if pattern.search(line):
            return runner
    return None


@dataclass(frozen=True)
class ServedRunner:
    """What a server's log says about its model runner: the runner and the line that said it,
    or every runner it named when its lines disagree."""

    runner: Runner | None = None
    line: str | None = None
    conflicting: tuple[Runner, ...] = field(default_factory=tuple)


def served_runner(evidence: Iterable[tuple[Runner, str]]) -> ServedRunner:
    """The runner named by (runner, line) pairs taken from a log, in log order."""
    seen: dict[Runner, str] = {}
    for runner, line in evidence:
        seen.setdefault(runner, line)
    if len(seen) > 1:
        return ServedRunner(conflicting=tuple(sorted(seen)))
    for runner, line in seen.items():
        return ServedRunner(runner, line)
    return ServedRunner()
