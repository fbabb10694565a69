"""From results to a verdict: the checks a plan judges, the sequential paired A/B
statistics, noise calibrations, stored baselines, the validity of a run, and the verdict
with its outcome and exit code."""

from __future__ import annotations

import importlib
from typing import Any

# Public names and the module of the stage that defines each: imported on first use,
# so that importing one module of the stage does not import all of them.
_EXPORTS = {
    "Baseline": "baseline",
    "compare_results": "compare",
    "ABReference": "compare",
    "BaselineReference": "compare",
    "NoReference": "compare",
    "Noise": "noise",
    "NoiseCalibration": "noise",
    "noise_for": "noise",
    "Check": "verdict",
    "Outcome": "verdict",
    "Verdict": "verdict",
    "load_verdict": "verdict",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
