"""Where a build spends its time: py-spy sampling of every serving process while a steady
load runs, the profile per 1k output tokens, the diff of two builds' profiles and its
differential flame graph."""

from __future__ import annotations

import importlib
from typing import Any

# Public names and the module of the stage that defines each: imported on first use,
# so that importing one module of the stage does not import all of them.
_EXPORTS = {
    "BuildProfile": "data",
    "load_build_profile": "data",
    "DiffSettings": "diff",
    "ProfileDiff": "diff",
    "SamplingOptions": "sampling",
    "profile_server": "traffic",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
