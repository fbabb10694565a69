"""The model runner a plan pins, through vLLM's own switch VLLM_USE_V2_MODEL_RUNNER.

vLLM has two model runners, and their structured-output paths differ
(docs/background.md#two-model-runners): V1 (`vllm/v1/worker/gpu_model_runner.py`, and the CPU
runner that subclasses it) applies the grammar bitmask in
`vllm/v1/structured_output/utils.py::apply_grammar_bitmask`; V2 (`vllm/v1/worker/gpu/`)
applies it through `vllm/v1/worker/gpu/structured_outputs.py` and `async_tensor_h2d`. A
measurement says nothing about a runner that did not serve it (gate.runner.model_runner reads
which one did from the server's log).

vLLM reads the variable as `bool(int(value))`: 0 is V1, any other integer V2; unset lets vLLM
choose (V2 where supported); anything int() rejects stops vLLM at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
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
