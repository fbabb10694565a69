"""The verdict as people read it: one markdown document (PR comment and job summary) from
a Jinja2 template, fitted to GitHub's size limit, every untrusted string escaped; the
terminal summary, charts and exports to other tools' formats."""

from __future__ import annotations

import importlib
from typing import Any

# Public names and the module of the stage that defines each: imported on first use,
# so that importing one module of the stage does not import all of them.
_EXPORTS = {
    "ReportInput": "render",
    "render_report": "render",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
