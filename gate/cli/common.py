"""Argument types and helpers shared by the command modules."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

from pydantic import ValidationError

from gate.core.errors import GateError
from gate.core.files import invalid
from gate.profile.diff_file import DiffSettings


class Terminated(BaseException):
    """SIGTERM (a cancelled CI job): unwinds like Ctrl-C so that every `finally` (stopping a
    server) runs."""


def _raise_terminated(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Within the block, SIGTERM raises Terminated."""
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def int_list(text: str) -> list[int]:
    """argparse type: `1,8,32`."""
    try:
        values = [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise GateError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise GateError("expected at least one integer")
    return values


def assignments(items: list[str] | None, option: str) -> dict[str, str]:
    """Repeated `--option NAME=VALUE` arguments as a dict; a malformed one is a GateError."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise GateError(f"{option} {item!r}: expected NAME=VALUE")
        out[name.strip()] = value.strip() if option == "--threshold" else value
    return out


def diff_settings(**fields) -> DiffSettings:
    """The profile diff's settings from command-line values, a clear error when out of range."""
    try:
        return DiffSettings(**fields)
    except ValidationError as exc:
        raise invalid("profile diff settings", exc) from None


def add_model_runner(p) -> None:
    """--model-runner: pin the plan's model runner for this command (docs/action.md)."""
    p.add_argument("--model-runner", choices=["v1", "v2", "auto"],
                   help="pin vLLM's model runner (VLLM_USE_V2_MODEL_RUNNER=0 or 1 in the "
                   "server's environment; auto: leave it to vLLM); default: the plan's")
