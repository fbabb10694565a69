"""The state files of `gate bisect`: started or resumed, saved after every finished step
(atomically), and the runner time of every session counted (docs/bisect.md#resuming).

A state belongs to one question: the same repository, commits, plan and installed build. A
folder that holds another bisect's state is refused rather than mixed in.

A stored state is data someone else may have written (in CI it comes back from an artifact of
a job that ran the measured code), so a resumed bisect takes from it only what git can back
or what is measurement record: the range's commits are listed again from git and must match,
every step must name a commit of the range, and the installed builds it lists (interpreters
and package folders, which a step would import from) are dropped unless the caller says the
folder is its own (`gate bisect --reuse-builds`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from gate.core.errors import GateError
from gate.core.files import load_json_model, write_atomic
from gate.evidence.bisect_record import BisectState, CommitInfo, HunksState
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


def usable_builds(stored: list[InstalledBuild], base: InstalledBuild, *,
                  reuse: bool = False) -> list[InstalledBuild]:
    """The installed builds a resumed bisect can overlay: this run's installed build first,
    then, with `reuse` only, the ones an earlier session installed that are still there. A
    stored build names an interpreter and a package folder that a step imports from, so
    without `reuse` (a state that came from elsewhere, a CI artifact) none is taken."""
    if not reuse:
        return [base]
    kept = [b for b in stored[1:] if b.commit != base.commit and Path(b.python).exists()
            and Path(b.package_dir).is_dir()]
    return [base, *kept]


def commits_from_git(stored: BisectState, commits: list[CommitInfo], path: Path) -> None:
    """Make a resumed state's range git's own: the stored commits must be `commits` (listed
    from git again), every step must name one of them, numbered in order, the endpoints step
    first and on the bad commit. Subjects come from git. A GateError names what differs."""
    shas = [c.sha for c in commits]
    if [c.sha for c in stored.commits] != shas:
        raise GateError(f"{path} lists {len(stored.commits)} commit(s) between good and bad, "
                        f"not git's {len(shas)}: a state git does not back is not resumed "
                        "(remove it to start over)")
    for i, step in enumerate(stored.steps, start=1):
        first = i == 1
        if (step.number != i or step.commit not in shas
                or (step.role == "endpoints") != first
                or (first and step.commit != stored.bad.sha)):
            raise GateError(f"{path}: step {i} ({step.role} on {step.commit[:40]!r}) is not a "
                            "step of this bisect: a state git does not back is not resumed "
                            "(remove it to start over)")
    subjects = {c.sha: c.subject for c in commits}
    stored.commits = list(commits)
    for step in stored.steps:
        step.subject = subjects[step.commit]
