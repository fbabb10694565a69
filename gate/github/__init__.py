"""Talking to GitHub: the REST client, the sticky comment and its hand-over file, job
summary, outputs and annotations, workflow commands on stdout, and the run-time trust
checks before PR code reaches a self-hosted runner."""

from __future__ import annotations

import importlib
from typing import Any

# Public names and the module of the stage that defines each: imported on first use,
# so that importing one module of the stage does not import all of them.
_EXPORTS = {
    "GitHubClient": "client",
    "PublishOptions": "publish",
    "publish": "publish",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
