"""A package's public names, imported on first use: importing one module of a stage does not
import all of its modules (every `gate` command would otherwise pay for numpy, scipy and the
HTTP client, and the poster's minimal install could not import the CLI)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, Sequence[str]]
                 ) -> tuple[Callable[[str], Any], list[str]]:
    """(`__getattr__`, `__all__`) for `package`, whose public names live in the given modules
    (module name -> the names it defines)."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__, sorted(where)
