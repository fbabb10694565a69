"""profile.json: one build's sampled stacks, split into time windows, with the output tokens
each window produced. The seam between `gate profile record` and `gate profile diff`.

A window's stacks are py-spy samples of every sampled process (API server, engine core,
workers) taken during that window; one sample stands for `sample_s` seconds of one thread
being active (running or runnable: py-spy leaves idle threads out). Frames are interned in
`BuildProfile.frames`; a function is identified by (file, name): the file relative to
site-packages or to a source root, the name qualified as the interpreter reports it
(`Class.method`, `outer.<locals>.inner`), so the same function matches across two builds
installed in different places.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gate.core.errors import GateError
from gate.core.files import load_json_model, write_atomic

PROFILE_SCHEMA_VERSION = 1
PROFILE_FILE = "profile.json"

# Installed packages: everything after the last of these is the import path.
_PACKAGE_DIRS = ("/site-packages/", "/dist-packages/")
# The standard library: lib/python3.11/json/encoder.py -> json/encoder.py
_STDLIB = re.compile(r"/lib/python\d+\.\d+/")

_SHM = "vllm/distributed/device_communicators/shm_broadcast.py"
# Spin-waits. A thread that polls in a loop (os.sched_yield) instead of blocking looks busy to
# a sampler, and the time it spends so grows with the *other* process's work: vLLM's engine
# core spins on the shared-memory queue while its worker runs a step, so a slower step shows
# up there as much as in the function that got slower. A sample whose stack holds one of
# these frames is counted as waiting, apart from every function.
WAIT_FRAMES = frozenset({
    ("vllm/distributed/utils.py", "sched_yield"),
    (_SHM, "MessageQueue.acquire_read"),
    (_SHM, "MessageQueue.acquire_write"),
    (_SHM, "SpinCondition.wait"),
})


class FrameInfo(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str = Field(description="relative to site-packages or a source root; else absolute")
    name: str = Field(description="qualified function name, e.g. Scheduler.schedule")
    line: int = Field(0, description="first line of the function (py-spy --function)")

    @property
    def key(self) -> tuple[str, str]:
        return (self.file, self.name)


class ProcessInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pid: int
    role: str = Field(description="APIServer, EngineCore, Worker, ... (from vLLM's titles)")
    title: str = ""


class StackCount(BaseModel):
    model_config = ConfigDict(extra="forbid")

    process: int = Field(description="index into BuildProfile.processes")
    frames: list[int] = Field(description="indexes into BuildProfile.frames, root first")
    count: int = Field(ge=1)


class SampleWindow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    index: int
    start_s: float = Field(description="seconds after the load started")
    end_s: float
    output_tokens: float = Field(ge=0, description="output tokens produced inside the window")
    sample_s: float = Field(gt=0, description="seconds of thread time one sample stands for")
    cpu_s: list[float] | None = Field(
        None, description="CPU seconds each process (by index) used in the window: py-spy "
        "counts a thread that waits for a core as active (see sample_ms); None: not measured")
    stacks: list[StackCount] = Field(default_factory=list)

    @property
    def samples(self) -> int:
        return sum(s.count for s in self.stacks)

    def sample_ms(self, n_processes: int, basis: str = "wall") -> list[float]:
        """ms that one sample of each process stands for. Wall: 1000 * sample_s. CPU: that,
        scaled by the process's CPU time over its sampled active time in this window (at
        most 1), so that a process starved of CPU by other work on the machine does not look
        slower in every function. Sound for processes that do not spin-wait: vLLM's engine
        core yields its core while it polls its queue, so there the scaling shrinks real work
        too. Without measured CPU times both bases are the same."""
        wall = 1000.0 * self.sample_s
        if basis == "wall" or self.cpu_s is None:
            return [wall] * n_processes
        active = [0] * n_processes
        for s in self.stacks:
            active[s.process] += s.count
        return [wall * min(1.0, cpu / (n * self.sample_s)) if n else wall
                for cpu, n in zip(self.cpu_s, active, strict=True)]


class BuildProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = PROFILE_SCHEMA_VERSION
    label: str = Field(description="which build: base, head, ...")
    created_at: str = ""
    source: str = Field("", description="what was profiled: a server URL, a program")
    rate_hz: int
    window_s: float
    processes: list[ProcessInfo]
    frames: list[FrameInfo] = Field(default_factory=list)
    windows: list[SampleWindow]
    requests: int = Field(0, description="requests completed during the load")
    roots: list[str] = Field(default_factory=list, description="source roots files are relative to")
    notes: list[str] = Field(default_factory=list, description="anything that weakens the profile")

    @property
    def output_tokens(self) -> float:
        return sum(w.output_tokens for w in self.windows)

    def waiting_frames(self) -> set[int]:
        """Indexes of the frames in WAIT_FRAMES."""
        return {i for i, f in enumerate(self.frames) if f.key in WAIT_FRAMES}


def relative_file(path: str, roots: Sequence[str | Path] = ()) -> str:
    """The path by which two installs of the same code agree: after site-packages, else
    relative to the longest matching source root, else after the standard library folder,
    else the path as given."""
    for marker in _PACKAGE_DIRS:
        if marker in path:
            return path.rsplit(marker, 1)[1]
    for root in sorted((os.path.abspath(r) for r in roots), key=len, reverse=True):
        if path.startswith(root.rstrip("/") + "/"):
            return path[len(root.rstrip("/")) + 1:]
    stdlib = list(_STDLIB.finditer(path))
    return path[stdlib[-1].end():] if stdlib else path


class FrameTable:
    """Interns frames while stacks are read from several files."""

    def __init__(self, frames: Iterable[FrameInfo] = ()):
        self.frames: list[FrameInfo] = list(frames)
        self.index = {f: i for i, f in enumerate(self.frames)}

    def add(self, frame: FrameInfo) -> int:
        if frame not in self.index:
            self.index[frame] = len(self.frames)
            self.frames.append(frame)
        return self.index[frame]


def read_speedscope(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise GateError(f"cannot read py-spy's speedscope file {path}: {exc}") from None
    if not isinstance(data, dict) or "shared" not in data or "profiles" not in data:
        raise GateError(f"{path} is not a speedscope file")
    return data


def speedscope_stacks(data: dict[str, Any], table: FrameTable, roots: Sequence[str | Path],
                      process: int) -> list[StackCount]:
    """Count the identical stacks of every thread of one py-spy speedscope file. py-spy
    writes each sample as a list of frame indexes, root first, one profile per thread."""
    local = [
        table.add(FrameInfo(file=relative_file(str(f.get("file") or ""), roots),
                            name=str(f.get("name") or "?"), line=int(f.get("line") or 0)))
        for f in data["shared"]["frames"]
    ]
    counts: Counter[tuple[int, ...]] = Counter()
    for profile in data["profiles"]:
        for sample in profile.get("samples") or ():
            counts[tuple(local[i] for i in sample)] += 1
    return [StackCount(process=process, frames=list(stack), count=n)
            for stack, n in sorted(counts.items())]


def tokens_between(events: Sequence[tuple[float, float]], start: float, end: float) -> float:
    """Sum of the token counts of the (time, tokens) events with start <= time < end."""
    return sum(n for t, n in events if start <= t < end)


def save_build_profile(profile: BuildProfile, out: Path) -> Path:
    """Write DIR/profile.json through a temporary file, so a crash leaves the old one."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / PROFILE_FILE
    write_atomic(path, profile.model_dump_json(indent=1))
    return path


def load_build_profile(path: str | Path) -> BuildProfile:
    """A profile from its folder (DIR/profile.json) or the file itself."""
    p = Path(path)
    if p.is_dir():
        p = p / PROFILE_FILE
    profile = load_json_model(BuildProfile, p, "profile file")
    if not profile.windows:
        raise GateError(f"{p} holds no sampling windows")
    bad = [w.index for w in profile.windows if w.output_tokens <= 0]
    if bad:
        raise GateError(f"{p}: windows {bad} produced no output tokens: the load did not run "
                        "while sampling, so there is nothing to normalise by")
    n_frames, n_procs = len(profile.frames), len(profile.processes)
    for w in profile.windows:
        for s in w.stacks:
            if s.process >= n_procs or any(i >= n_frames or i < 0 for i in s.frames):
                raise GateError(f"{p}: window {w.index} refers to a frame or process that the "
                                "file does not define")
    return profile
