"""Which vLLM model runner serves: pinned through vLLM's own switch, read back from the log.

vLLM has two model runners, and their structured-output paths differ
(docs/background.md#two-model-runners): V1 (`vllm/v1/worker/gpu_model_runner.py`, and the CPU
runner that subclasses it) applies the grammar bitmask in
`vllm/v1/structured_output/utils.py::apply_grammar_bitmask`; V2 (`vllm/v1/worker/gpu/`)
applies it through `vllm/v1/worker/gpu/structured_outputs.py` and `async_tensor_h2d`. A
measurement says nothing about a runner that did not serve it.

`VLLM_USE_V2_MODEL_RUNNER` is read by vLLM as `bool(int(value))`: 0 is V1, any other integer
V2; unset lets vLLM choose (V2 where supported); anything int() rejects stops vLLM at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from gate.core.errors import GateError

RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"
Runner = Literal["v1", "v2"]
RUNNERS: tuple[Runner, ...] = ("v1", "v2")


def parse_pin(value: str, where: str = RUNNER_ENV) -> Runner:
    """The runner a value of VLLM_USE_V2_MODEL_RUNNER selects, read as vLLM reads it."""
    try:
        number = int(value)
    except ValueError:
        raise GateError(f"{where}={value!r}: vLLM reads it with int(), so this value stops the "
                        "server at start-up; use 0 (V1 model runner) or 1 (V2)") from None
    return "v2" if number else "v1"


def pinned_runner(env: Mapping[str, str]) -> Runner | None:
    """The runner `env` pins; None when VLLM_USE_V2_MODEL_RUNNER is unset (vLLM chooses)."""
    value = env.get(RUNNER_ENV)
    return None if value is None else parse_pin(value)


def pin_value(runner: Runner) -> str:
    """The VLLM_USE_V2_MODEL_RUNNER value that pins `runner`."""
    return "1" if runner == "v2" else "0"


def label(runner: str | None) -> str:
    return f"{runner.upper()} model runner" if runner else "model runner unknown"


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
