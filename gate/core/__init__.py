"""The foundation every stage stands on: user-facing errors and exit codes, files (atomic
writes, strict YAML/JSON loading), settings read once from the environment, progress lines,
git, and plain-text helpers. Imports nothing else of the gate."""

from __future__ import annotations

import importlib
from typing import Any

# Public names and the module of the stage that defines each: imported on first use,
# so that importing one module of the stage does not import all of them.
_EXPORTS = {
    "(": "errors",
    "load_json_model": "files",
    "load_yaml_mapping": "files",
    "load_yaml_model": "files",
    "write_atomic": "files",
    "merge_base": "git",
    "resolve_ref": "git",
    "run_git": "git",
    "Progress": "progress",
    "Settings": "settings",
    "one_line": "text",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
