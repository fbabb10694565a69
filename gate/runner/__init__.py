"""The machine and the build: the runner doctor and the facts it reads from /proc, cgroups,
nvidia-smi (one reader, gpus.py) and the server's log (the model runner that served,
model_runner.py), the environment fingerprint, installing a vLLM build (and its precompiled
wheels, wheels.py; one commit's build as an overlay over an installed one), and the tiny
random-weight model the CPU path serves."""

from __future__ import annotations

import importlib
from typing import Any

# Public names and the module of the stage that defines each: imported on first use,
# so that importing one module of the stage does not import all of them.
_EXPORTS = {
    "DoctorReport": "doctor",
    "Finding": "doctor",
    "Severity": "doctor",
    "Fingerprint": "fingerprint",
    "warnings_for": "fingerprint",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
