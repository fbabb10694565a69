"""Argument types and helpers shared by the command modules."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from gate.core.errors import GateError
from gate.core.files import invalid
from gate.judge.looks import Trajectory
from gate.judge.verdict import Verdict
from gate.measure.results import Results
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


def nights_on_main(history: Path, head: Results) -> dict[str, list[float]]:
    """Each check's last nights on the default branch, for the head's plan and runner class:
    the sparklines of the report and the comment (gate report --history, gate publish)."""
    from gate.history.store import opened, runner_class

    with opened(history) as store:
        return store.recent(head.plan.name, runner_class(head.fingerprint))


def replayed_looks(verdict: Verdict, head: Results | None, base: Results | None, *,
                   noise_dir: list[Path] | None, cache_dir: Path | None
                   ) -> list[Trajectory] | None:
    """The A/B's sequential test look by look, replayed as gate compare judged it with the
    calibrations it used (`noise_dir`, as gate compare's): the report's and the comment's
    pictures of why it stopped. Imported here: the sequential test needs numpy, which the
    token jobs' lock leaves out."""
    if verdict.mode != "ab" or head is None or base is None:
        return None
    from gate.judge.noise import noise_dirs, noise_for
    from gate.judge.trajectory import trajectories
    from gate.plan.thresholds import Thresholds

    applied = {k: "null" if v is None else str(v) for k, v in (verdict.thresholds or {}).items()
               if k in Thresholds.model_fields}
    thresholds = head.plan.thresholds.with_overrides(applied)
    noise = noise_for(noise_dirs(noise_dir, cache_dir), head.plan.name, head.plan_hash,
                      head.fingerprint)
    return trajectories(head, base, thresholds, noise)
