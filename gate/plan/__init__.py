"""What to measure: the plan (server, workload, warm-up, drain, sweep, A/B settings, the model
runner it pins), its thresholds, the request bodies and built-in schemas of the workload, what
the plan costs on its runner (cost.py), and the built-in plans (builtin/*.yaml)."""

from __future__ import annotations

import importlib
from typing import Any

# Public names and the module of the stage that defines each: imported on first use,
# so that importing one module of the stage does not import all of them.
_EXPORTS = {
    "Plan": "spec",
    "ServerSpec": "spec",
    "TinyModelSpec": "spec",
    "WorkloadSpec": "spec",
    "apply_overrides": "spec",
    "load_plan": "spec",
    "Thresholds": "thresholds",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
