"""A build's first start, priced apart (docs/upgrade.md#cold-starts).

The first `vllm serve` of a freshly installed build fills its compile caches and takes
minutes longer than every later start (293-298 s against 80-110 s measured on a 2-core
runner). Measured inside a block, that start would be priced as the cost of every block: the
screening message's calibration estimate, the design's budget check and a calibration's
stored cost would all be a cold start's. So before the A/B, each build that needs it is
started once on its own (both together when the plan keeps two servers up), timed to
/health, and stopped; the blocks then start on warm caches.

Which builds: `auto` (the default) those the gate installed itself (a release or a wheel,
gate.runner.builds) whose first start with this server configuration is not on record in the
cache folder (first-starts/), `always` every build, `never` none. A server that dies there is
the build's failure to serve, named with its log's last error line, before anything is
measured.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from gate.core.errors import MeasurementError
from gate.core.files import write_atomic
from gate.core.progress import Progress
from gate.judge.first_cause import condensed
from gate.measure.measured_build import Launch, StartedServer, start_server
from gate.measure.results import ServerInfo
from gate.plan.spec import Plan

Policy = Literal["auto", "always", "never"]
POLICIES: tuple[Policy, ...] = ("auto", "always", "never")
RECORD_DIR = "first-starts"
RECORD_SCHEMA_VERSION = 1
# Server settings that do not change what a start compiles (or that vary run to run).
_NOT_COMPILED = ("port", "host", "startup_timeout_s", "shutdown_timeout_s", "python",
                 "structured_outputs_backend", "structured_outputs_config")


class FirstStartRecord(BaseModel):
    """first-starts/<key>.json: this build was started with this server configuration."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = RECORD_SCHEMA_VERSION
    build: str
    python: str
    seconds: float
    at: str


@dataclass(frozen=True)
class Candidate:
    """A build that may need its first start: how to launch it and whether the gate
    installed it."""

    label: str
    name: str  # what a person calls it: the requirement, the path
    python: str
    env: dict[str, str]
    installed_by_gate: bool


@dataclass(frozen=True)
class FirstStart:
    label: str
    name: str
    seconds: float  # launch to /health

    @property
    def note(self) -> str:
        return (f"first start of the {self.label} build ({self.name}): {self.seconds:.0f} s to "
                "healthy, filling its compile caches; measured apart and not counted in any "
                "block's cost")


class FirstStartFailed(MeasurementError):
    """A build whose server did not come up at its first start: it cannot be measured."""

    def __init__(self, candidate: Candidate, cause: MeasurementError):
        self.label, self.full = candidate.label, str(cause)
        super().__init__(f"the {candidate.label} build ({candidate.name}) did not serve at its "
                         f"first start: {condensed(str(cause))}")


def record_path(cache_dir: Path, plan: Plan, candidate: Candidate) -> Path:
    server = plan.server.model_dump(mode="json", exclude=set(_NOT_COMPILED))
    # abspath, not realpath: a virtualenv's python is a link to the interpreter it was made
    # from, and two virtualenvs are two builds
    key_text = json.dumps([os.path.abspath(candidate.python), sorted(candidate.env.items()),
                           server], sort_keys=True)
    return cache_dir / RECORD_DIR / f"{hashlib.sha256(key_text.encode()).hexdigest()[:16]}.json"


def needed(plan: Plan, candidates: list[Candidate], *, cache_dir: Path,
           policy: Policy) -> list[Candidate]:
    """The builds whose first start is to be made now, once each."""
    if policy == "never":
        return []
    chosen, seen = [], set()
    for c in candidates:
        key = record_path(cache_dir, plan, c)
        if key in seen or (policy == "auto" and (not c.installed_by_gate or key.is_file())):
            continue
        seen.add(key)
        chosen.append(c)
    return chosen


def first_starts(plan: Plan, candidates: list[Candidate], *, out: Path, cache_dir: Path,
                 policy: Policy = "auto", progress: Progress | None = None) -> list[FirstStart]:
    """Start each build that needs it once (see the module docstring) and record it; what each
    took. FirstStartFailed when a server does not come up."""
    log = progress or Progress(quiet=True)
    todo = needed(plan, candidates, cache_dir=cache_dir, policy=policy)
    together = plan.ab.servers == "persistent"
    groups = [todo] if together else [[c] for c in todo]
    done: list[FirstStart] = []
    for group in groups:
        if group:
            done += _start_group(plan, group, out=out, cache_dir=cache_dir, log=log)
    for start, c in zip(done, todo, strict=True):
        write_atomic(record_path(cache_dir, plan, c), FirstStartRecord(
            build=c.name, python=c.python, seconds=start.seconds,
            at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        ).model_dump_json(indent=1) + "\n")
        log(start.note)
    return done


def _start_group(plan: Plan, group: list[Candidate], *, out: Path, cache_dir: Path,
                 log: Progress) -> list[FirstStart]:
    with contextlib.ExitStack() as stack:
        started: list[tuple[Candidate, StartedServer]] = []
        for c in group:  # all launched before any is waited for: their starts overlap
            log(f"{c.label}: first start of {c.name} (compile caches are filled now)")
            launch = Launch(c.label, out / c.label / "first-start", cache_dir=cache_dir,
                            python=c.python, env=c.env)
            info = ServerInfo(base_url="", started_by_gate=True, model="")
            try:
                server = start_server(plan, launch, info, log)
            except MeasurementError as exc:
                raise FirstStartFailed(c, exc) from exc
            stack.callback(server.server.stop)
            started.append((c, server))
        done = []
        for c, server in started:
            try:
                server.server.wait_healthy()
            except MeasurementError as exc:
                raise FirstStartFailed(c, exc) from exc
            seconds = server.server.startup_s or time.monotonic() - server.started
            done.append(FirstStart(c.label, c.name, round(seconds, 1)))
        return done
