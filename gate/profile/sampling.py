"""The profiling cell: sample a running vLLM server's processes with py-spy while the gate's
own client keeps a guided-JSON load on it (gate.profile.traffic), and count the output tokens of
every window.

The server's process tree is found from its root pid (the API server; vLLM titles its engine
core and workers `VLLM::EngineCore`, `VLLM::Worker`). Sampling is split into `windows`
consecutive windows of about `window_s` seconds; in each, one `py-spy record --nonblocking`
per process runs concurrently (py-spy reads the target's memory without stopping it) until
the gate stops them all at once with SIGINT. A window starts at the mean of the py-spys'
"Sampling process" lines and ends at that SIGINT; the tokens counted for it are those whose
stream chunks arrived in between. The windows are what `gate profile diff` resamples to tell
a real difference from sampling noise.

This runs after the measured cells (it must never bias a verdict); `should_profile` is the
`--profile always|never|auto` policy. py-spy is an optional extra (`pip install
'gate[profile]'`): without it `--profile always` is refused before anything starts
(`require_py_spy`), and `auto` goes on without a profile diff, the verdict's note says why.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from gate.core.errors import GateError, MeasurementError
from gate.profile.data import (
    BuildProfile,
    FrameTable,
    ProcessInfo,
    SampleWindow,
    read_speedscope,
    speedscope_stacks,
    tokens_between,
)

PROFILE_POLICIES = ("always", "never", "auto")
WINDOW_OVER = "profile window over"
SPEEDSCOPE_FILE = "profile.speedscope.json"
# py-spy's --rate: enough samples for the diff's floors at a few % of a 2-core server's
# throughput (docs/profile.md#overhead).
DEFAULT_RATE_HZ = 50


def should_profile(policy: str, outcomes: Iterable[object]) -> bool:
    """`--profile` policy: always, never, or auto = when any check failed or is inconclusive
    (an error means the measurement is broken: a profile of it would explain nothing)."""
    if policy not in PROFILE_POLICIES:
        raise GateError(f"--profile must be one of {', '.join(PROFILE_POLICIES)}, got {policy!r}")
    if policy != "auto":
        return policy == "always"
    return any(str(getattr(o, "value", o)) in ("fail", "inconclusive") for o in outcomes)


@dataclass
class SamplingOptions:
    rate_hz: int = DEFAULT_RATE_HZ
    windows: int = 5
    window_s: float = 3.0
    settle_s: float = 2.0  # load before the first window, so every window sees a full batch

    def check(self) -> None:
        if not 1 <= self.rate_hz <= 1000:
            raise GateError(f"sampling rate must be 1-1000 Hz, got {self.rate_hz}")
        if self.windows < 2:
            raise GateError(f"need at least 2 windows to judge noise, got {self.windows}")
        if not 0.5 <= self.window_s <= 600:
            raise GateError(f"window length must be 0.5-600 s, got {self.window_s}")
        if self.settle_s < 0:
            raise GateError(f"settle time must not be negative, got {self.settle_s}")


# --------------------------------------------------------------------------------------------
# Which processes, and py-spy itself
# --------------------------------------------------------------------------------------------

PY_SPY_MISSING = "py-spy is not installed: pip install 'gate[profile]'"


def find_py_spy() -> str:
    """py-spy next to this interpreter (a venv's bin/, where the `profile` extra puts it),
    or on PATH."""
    candidates = [str(Path(sys.executable).parent / "py-spy"), shutil.which("py-spy")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    raise GateError(PY_SPY_MISSING)


def require_py_spy(policy: str) -> None:
    """At the start of an A/B or bisect: `--profile always` without py-spy is refused here,
    before any server starts, rather than found out after the rounds. `auto` and `never` go
    on: auto's profiling then fails at once, into the verdict's note (gate.flows.ab.Profiler)."""
    if policy == "always":
        find_py_spy()


def _role(proc: psutil.Process, is_root: bool) -> tuple[str, str] | None:
    """(role, title) of a process worth sampling, or None. vLLM retitles its children
    `VLLM::EngineCore`, `VLLM::Worker_TP0`, ...; other children (multiprocessing's resource
    tracker) do no serving work."""
    try:
        cmdline = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    title = cmdline[0] if cmdline else proc.name()
    if title.startswith("VLLM::"):
        return title.removeprefix("VLLM::"), title
    if len(cmdline) > 2 and cmdline[1] == "-c":  # `vllm serve` started as python -c CODE serve
        cmdline = [cmdline[0], "-c", "…", *cmdline[3:]]
    return ("APIServer", " ".join(cmdline)[:200]) if is_root else None


def server_processes(root_pid: int) -> list[ProcessInfo]:
    """The root (API server) and its vLLM-titled descendants."""
    try:
        root = psutil.Process(root_pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        raise GateError(f"no process with pid {root_pid}") from None
    found = []
    for proc in tree:
        role = _role(proc, proc.pid == root_pid)
        if role:
            found.append(ProcessInfo(pid=proc.pid, role=role[0], title=role[1]))
    return found


def pid_listening_on(base_url: str) -> int:
    """The local process that listens on the URL's port (the API server)."""
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        raise GateError("cannot list sockets to find the server's pid: pass --pid") from None
    pids = {c.pid for c in conns if c.status == psutil.CONN_LISTEN and c.laddr
            and c.laddr.port == port and c.pid}
    if len(pids) != 1:
        what = "no local process listens" if not pids else f"{len(pids)} processes listen"
        raise GateError(f"{what} on port {port} of {base_url}: pass the server's --pid")
    return pids.pop()


# --------------------------------------------------------------------------------------------
# py-spy runs and windows
# --------------------------------------------------------------------------------------------

def cpu_seconds(processes: Sequence[ProcessInfo]) -> list[float] | None:
    """User + system CPU seconds of each process so far (its own threads, not children);
    None when one is gone or unreadable."""
    try:
        return [sum(psutil.Process(p.pid).cpu_times()[:2]) for p in processes]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


class PySpyStartTimeout(MeasurementError):
    """py-spy is running but has not taken its first sample in time."""


class PySpyRun:
    """One `py-spy record` of one process for one window. It samples until `stop()` sends
    it SIGINT (py-spy then writes its file and exits 0): every process's window then ends at
    the same moment, and a sample stands for 1/rate seconds on average (py-spy draws its
    sampling times from a Poisson process, so a fixed --duration would end each window at a
    random time)."""

    def __init__(self, py_spy: str, proc: ProcessInfo, out: Path, rate_hz: int):
        self.proc, self.out = proc, out
        cmd = [py_spy, "record", "--pid", str(proc.pid), "--format", "speedscope",
               "--rate", str(rate_hz), "--nonblocking", "--function", "--output", str(out)]
        self.started_at: float | None = None
        self.lines: list[str] = []
        self.popen = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            # Printed as py-spy's sampling thread starts (Rust's stdout is line-buffered).
            if self.started_at is None and "Sampling process" in line:
                self.started_at = time.perf_counter()
            self.lines.append(line.rstrip())

    def wait_started(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.started_at is None:
            if self.popen.poll() is not None:
                self.reader.join(timeout=5)
                raise self._failure()
            if time.monotonic() > deadline:
                self.kill()
                raise PySpyStartTimeout(f"py-spy did not start sampling {self.proc.role} "
                                        f"(pid {self.proc.pid}) within {timeout_s:.0f}s")
            time.sleep(0.01)

    def stop(self) -> None:
        """End the window: SIGINT, then wait for py-spy to write its file."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGINT)
        try:
            self.popen.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
            raise MeasurementError(f"py-spy did not write its profile of {self.proc.role} "
                                   f"(pid {self.proc.pid}) within 60s of being stopped") from None
        self.reader.join(timeout=5)
        if self.popen.returncode != 0 or not self.out.is_file():
            raise self._failure()

    def _failure(self) -> MeasurementError:
        tail = " | ".join(ln for ln in self.lines[-4:] if ln.strip()) or "no output"
        return MeasurementError(
            f"py-spy could not sample {self.proc.role} (pid {self.proc.pid}), exit "
            f"{self.popen.returncode}: {tail}. py-spy needs ptrace rights over the server "
            "(same user or root; in a container add the SYS_PTRACE capability)")

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()

    @property
    def late(self) -> bool:
        """py-spy fell behind its rate by over a second (it then takes the missed samples
        in a burst)."""
        return any("behind in sampling" in ln for ln in self.lines)


@dataclass
class WindowRecording:
    index: int
    runs: list[PySpyRun]
    end: float  # when the window was stopped (time.perf_counter)
    cpu_s: list[float] | None = None  # CPU seconds of each run's process in the window

    @property
    def start(self) -> float:
        """The processes' sampling starts differ by py-spy's attach times: take their mean."""
        return statistics.fmean(r.started_at for r in self.runs if r.started_at is not None)


@dataclass
class Sampler:
    """Runs the windows in a background thread while the caller drives the load."""

    processes: list[ProcessInfo]
    opts: SamplingOptions
    raw_dir: Path
    log: Callable[[str], None] = print
    py_spy: str = field(default_factory=find_py_spy)
    recordings: list[WindowRecording] = field(default_factory=list)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.done = threading.Event()
        self._stop = threading.Event()
        self._live: list[PySpyRun] = []
        self._thread = threading.Thread(target=self._run, name="gate-profile-sampler", daemon=True)

    def start(self) -> None:
        self.raw_dir.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            if self._stop.wait(self.opts.settle_s):
                return
            for i in range(self.opts.windows):
                if self._stop.is_set():
                    return
                self.recordings.append(self._window(i))
                self.log(f"profile window {i + 1}/{self.opts.windows} sampled")
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            self.error = exc
        finally:
            for run in self._live:
                run.kill()
            self.done.set()

    def _start(self, i: int) -> None:
        """Start one py-spy per process for window `i` and wait until all of them sample."""
        self._live = [
            PySpyRun(self.py_spy, p, self.raw_dir / f"w{i}-{p.role}-{p.pid}.speedscope.json",
                     self.opts.rate_hz)
            for p in self.processes
        ]
        for run in self._live:
            run.wait_started()

    def _window(self, i: int) -> WindowRecording:
        try:
            self._start(i)
        except PySpyStartTimeout as exc:
            # A py-spy can hang before its first sample on a loaded server: start the window
            # again (docs/background.md#py-spy-on-a-loaded-server).
            for run in self._live:
                run.kill()
            self.log(f"profile window {i + 1}: {exc}; starting py-spy again")
            self._start(i)
        cpu0 = cpu_seconds(self.processes)
        start = statistics.fmean(r.started_at for r in self._live if r.started_at is not None)
        self._stop.wait(max(0.0, start + self.opts.window_s - time.perf_counter()))
        end = time.perf_counter()
        cpu1 = cpu_seconds(self.processes)
        for run in self._live:
            run.stop()
        cpu = [b - a for a, b in zip(cpu0, cpu1, strict=True)] if cpu0 and cpu1 else None
        return WindowRecording(i, self._live, end, cpu)

    def abort_reason(self) -> str | None:
        """For the load's abort hook: stop sending once the windows are over."""
        if self.error is not None:
            return f"sampling failed: {self.error}"
        return WINDOW_OVER if self.done.is_set() else None

    def stop(self) -> None:
        self._stop.set()
        for run in list(self._live):
            run.kill()
        self._thread.join(timeout=30)

    def result(self) -> list[WindowRecording]:
        if self.error is not None:
            if isinstance(self.error, GateError):
                raise self.error
            raise MeasurementError(f"sampling failed: {self.error!r}")
        if len(self.recordings) != self.opts.windows:
            raise MeasurementError(f"sampling stopped after {len(self.recordings)} of "
                                   f"{self.opts.windows} windows")
        return self.recordings


@dataclass(frozen=True)
class SampledLoad:
    """One sampling under load: the windows' py-spy recordings, the processes sampled, the
    (time, tokens) of every stream chunk and the load's start, both on time.perf_counter."""

    recordings: Sequence[WindowRecording]
    processes: list[ProcessInfo]
    events: Sequence[tuple[float, float]]
    t0: float


def assemble_profile(sampled: SampledLoad, opts: SamplingOptions, *, label: str, source: str,
                     roots: Sequence[str | Path] = (), requests: int = 0) -> BuildProfile:
    """Read every window's py-spy files into one BuildProfile."""
    recordings, events, processes, t0 = (sampled.recordings, sampled.events, sampled.processes,
                                         sampled.t0)
    table = FrameTable()
    windows, notes = [], []
    for rec in recordings:
        stacks = []
        for run in rec.runs:
            stacks += speedscope_stacks(read_speedscope(run.out), table, roots,
                                        processes.index(run.proc))
            if run.late:
                notes.append(f"window {rec.index}: py-spy fell behind on {run.proc.role} "
                             f"(pid {run.proc.pid}); lower the rate")
        windows.append(SampleWindow(
            index=rec.index, start_s=round(rec.start - t0, 4), end_s=round(rec.end - t0, 4),
            output_tokens=round(tokens_between(events, rec.start, rec.end), 3),
            sample_s=1.0 / opts.rate_hz, cpu_s=rec.cpu_s, stacks=stacks,
        ))
    return BuildProfile(
        label=label, created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        source=source, rate_hz=opts.rate_hz, window_s=opts.window_s, processes=processes,
        frames=table.frames, windows=windows, requests=requests,
        roots=[str(r) for r in roots], notes=notes,
    )


def merge_speedscope(recordings: Sequence[WindowRecording], out: Path, name: str) -> Path:
    """One speedscope file for the build: py-spy's per-window files joined, one profile per
    (process, thread), windows one after another (the gaps between them are left out)."""
    frames: dict[tuple, int] = {}
    shared: list[dict] = []
    profiles: dict[str, dict] = {}
    for rec in recordings:
        for run in rec.runs:
            data = read_speedscope(run.out)
            local = []
            for f in data["shared"]["frames"]:
                key = (f.get("name"), f.get("file"), f.get("line"))
                if key not in frames:
                    frames[key] = len(shared)
                    shared.append(f)
                local.append(frames[key])
            for prof in data["profiles"]:
                title = f"{run.proc.role} pid {run.proc.pid}: {prof.get('name', '')}"
                merged = profiles.setdefault(title, {
                    "type": "sampled", "name": title, "unit": prof.get("unit", "seconds"),
                    "startValue": 0.0, "endValue": 0.0, "samples": [], "weights": []})
                merged["samples"] += [[local[i] for i in s] for s in prof.get("samples", [])]
                merged["weights"] += list(prof.get("weights", []))
                merged["endValue"] = sum(merged["weights"])
    doc = {"$schema": "https://www.speedscope.app/file-format-schema.json",
           "profiles": list(profiles.values()), "shared": {"frames": shared},
           "activeProfileIndex": 0, "exporter": "gate profile (from py-spy)", "name": name}
    out.write_text(json.dumps(doc))
    return out
