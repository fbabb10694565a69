"""The `gate` command line: one module per command, each thin over the library below it.

Nothing in the library imports from this package. `gate.cli.main.COMMANDS` is the one list of
subcommands; every command module has `add_parser(subparsers)` and `handle(args, settings)`.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public names and the module of the stage that defines each: imported on first use,
# so that importing one module of the stage does not import all of them.
_EXPORTS = {
    "main": "main",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
