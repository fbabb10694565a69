"""What in the PR may explain a slowdown: its diff hunks in the watched structured-output
paths, their ranking by the time the profile diff measured in the functions they change, and
the model runner(s) and backend(s) its changed files call for (scope.py); the bisect's search
over commits and delta debugging over hunks, and the files a bisect keeps."""

from __future__ import annotations

import importlib
from typing import Any

# Public names and the module of the stage that defines each: imported on first use,
# so that importing one module of the stage does not import all of them.
_EXPORTS = {
    "Evidence": "attribution",
    "Hunk": "hunks",
    "HunkSet": "hunks",
    "extract_hunks": "hunks",
    "load_hunks": "hunks",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
