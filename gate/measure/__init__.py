"""One build's server and load: `vllm serve` in its own process group, the streaming load
client, the cells measured on one build, the per-stream integrity checks, the metrics
(vllm bench serve's definitions) and results.json."""

from __future__ import annotations

import importlib
from typing import Any

# Public names and the module of the stage that defines each: imported on first use,
# so that importing one module of the stage does not import all of them.
_EXPORTS = {
    "Launch": "measured_build",
    "MeasuredBuild": "measured_build",
    "open_measured_build": "measured_build",
    "(": "results",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
