"""The state files of `gate bisect`: started or resumed, saved after every finished step
(atomically), and the runner time of every session counted (docs/bisect.md#resuming).

A state belongs to one question: the same repository, commits, plan and installed build. A
folder that holds another bisect's state is refused rather than mixed in."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from gate.core.errors import GateError
from gate.core.files import load_json_model, write_atomic
from gate.evidence.bisect_record import BisectState, HunksState
from gate.runner.commit_build import InstalledBuild

S = TypeVar("S", BisectState, HunksState)
STATE_FILE = "bisect-state.json"
HUNKS_STATE_FILE = "hunks-state.json"


def load_state(model: type[S], path: Path) -> S | None:
    return load_json_model(model, path, "bisect state") if path.is_file() else None


def check_same(found: BaseModel, wanted: BaseModel, fields: tuple[str, ...], path: Path) -> None:
    """A GateError naming the first field in which the stored state differs from this run."""
    for name in fields:
        have, want = getattr(found, name), getattr(wanted, name)
        if have != want:
            raise GateError(
                f"{path} holds another bisect ({name}: {_show(have)}, this run: {_show(want)}); "
                "use another --out folder, or remove it to start over")


def _show(value: object) -> str:
    if isinstance(value, BaseModel):
        value = getattr(value, "sha", None) or value.model_dump()
    if isinstance(value, list):
        return f"{len(value)} item(s)"
    return str(value)[:80]


class Checkpoint:
    """Saves the state after each finished step; the time of this session outside its
    steps (servers of the reference build, builds) goes to `overhead_s`."""

    def __init__(self, state: BisectState | HunksState, path: Path):
        self.state, self.path = state, path
        self.started = time.monotonic()
        self.overhead_before = state.overhead_s
        self.step_seconds = 0.0

    def finished(self, seconds: float) -> None:
        """A step of `seconds` was added to the state: save."""
        self.step_seconds += seconds
        self.save()

    def save(self) -> None:
        spent = time.monotonic() - self.started - self.step_seconds
        self.state.overhead_s = round(self.overhead_before + max(spent, 0.0), 1)
        write_atomic(self.path, self.state.model_dump_json(indent=1))


def relative(path: str | None, root: Path) -> str | None:
    """`path` relative to the bisect's folder (as the state and the result name files)."""
    if not path:
        return path
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


def usable_builds(stored: list[InstalledBuild], base: InstalledBuild) -> list[InstalledBuild]:
    """The installed builds a resumed bisect can overlay: this run's installed build first,
    then the ones an earlier session installed that are still there (a CI re-run attempt
    restores the state on a fresh runner, without them)."""
    kept = [b for b in stored[1:] if b.commit != base.commit and Path(b.python).exists()
            and Path(b.package_dir).is_dir()]
    return [base, *kept]
