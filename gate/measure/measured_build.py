"""One build under measurement: its `vllm serve` (started by the gate, or reached by URL), the
requests sent to it so far, and the cells measured on it.

`gate run` opens one measured build; `gate ab` opens one per build, either both at once (cells
alternate between them) or one per round. Each measures one cell at a time:

- the drain: N guided requests under a concurrency cap, timed from the first send to the last
  byte (the seed regression's headline figure);
- a sweep cell: a steady-state window of the plan's length (gate.measure.client.run_window);

then validates guided outputs against their schemas and checks that every stream really
streamed (gate.measure.stream_integrity). A cell whose streams arrived coalesced is measured again, up to
`sweep.remeasure_coalesced` times; if it stays coalesced the measurement is an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gate.core.errors import GateError, MeasurementError
from gate.core.progress import Progress
from gate.measure import client, metrics, server_metrics, stream_integrity
from gate.measure.client import Request, Response, SteadyWindow
from gate.measure.results import (
    Arm,
    CellKey,
    CellSummary,
    MachineSample,
    RequestRecord,
    ServerInfo,
)
from gate.measure.server import VllmServer
from gate.plan import workload
from gate.plan.runner_pin import label
from gate.plan.spec import Plan
from gate.runner import doctor, probes, tiny_model
from gate.runner.doctor import DoctorReport, Finding, Severity
from gate.runner.fingerprint import ServedFacts
from gate.runner.probes import read_server_log


@dataclass(frozen=True)
class Cell:
    """A cell to measure: which one, and (drain and warm-up) how many requests it sends."""

    key: CellKey
    requests: int = 0
    # Another cell of the same condition that this cell's window stands for (ab.cells:
    # judged: the sweep's guided cell at the drain's concurrency): summarised under both keys,
    # its requests recorded once.
    also: CellKey | None = None

    @property
    def label(self) -> str:
        return self.key.label


def cells_for_repeat(plan: Plan, repeat: int) -> list[Cell]:
    """The measured cells of one repeat: the drain, then the sweep. Interleaved order flips
    which arm goes first at every level, so neither arm always runs on a warmer server."""
    cells = []
    if plan.drain.enabled:
        cells.append(Cell(CellKey("drain", "guided", plan.drain.concurrency, repeat),
                          plan.drain.requests))
    if not plan.sweep.enabled:
        return cells
    sweep = plan.sweep
    if sweep.order == "blocked":
        return cells + [Cell(CellKey("sweep", arm, lv, repeat))
                        for arm in sweep.arms for lv in sweep.levels]
    for i, level in enumerate(sweep.levels):
        arms = sweep.arms if (i + repeat) % 2 == 0 else list(reversed(sweep.arms))
        cells += [Cell(CellKey("sweep", arm, level, repeat)) for arm in arms]
    return cells


def window_for(plan: Plan, key: CellKey, stagger_s: float = 0.0) -> SteadyWindow | None:
    """The steady-state window a cell is measured in; None: a drain of a fixed count.
    `stagger_s` spreads the slots' first sends (see client.Window)."""
    if key.phase == "drain":
        drain = plan.drain
        if drain.window_s is None:
            return None
        return SteadyWindow(seconds=drain.window_s, min_requests=drain.requests,
                      max_seconds=max(drain.max_window_s, drain.window_s), stagger_s=stagger_s)
    sweep = plan.sweep
    return SteadyWindow(seconds=sweep.window_at(key.concurrency),
                        min_requests=sweep.min_requests_factor * key.concurrency,
                  max_seconds=sweep.max_window_s, stagger_s=stagger_s)


def to_record(resp: Response, key: CellKey, schema: dict | None, t0: float) -> RequestRecord:
    rec = RequestRecord(
        index=resp.index, phase=key.phase, arm=key.arm, concurrency=key.concurrency,
        repeat=key.repeat, send_s=resp.send - t0, ttft_s=resp.ttft, itl_s=resp.itl,
        deliveries=resp.deliveries, e2el_s=(resp.end - resp.send) if resp.end is not None else None,
        output_tokens=resp.output_tokens, prompt_tokens=resp.prompt_tokens,
        finish_reason=resp.finish_reason, http_status=resp.status, error=resp.error,
        text=resp.text,
    )
    if schema is not None:
        problem = "request failed" if not rec.ok else workload.validate_output(rec.text, schema)
        rec.json_valid = problem is None
        rec.validation_error = problem
    return rec


def cell_problems(records: list[RequestRecord], label: str) -> list[str]:
    """What makes this cell's measurement untrustworthy, in words."""
    problems = []
    failed = [r for r in records if not r.ok]
    if failed:
        problems.append(
            f"{label}: {len(failed)} of {len(records)} requests failed (first: {failed[0].error})"
        )
    invalid = [r for r in records if r.ok and r.json_valid is False]
    if invalid:
        problems.append(
            f"{label}: {len(invalid)} of {len(records)} guided outputs do not follow the schema "
            f"(first: {invalid[0].validation_error}; text {invalid[0].text[:80]!r})"
        )
    return problems


@contextlib.contextmanager
def timed(timings: dict[str, float], key: str) -> Iterator[None]:
    start = time.monotonic()
    try:
        yield
    finally:
        timings[key] = timings.get(key, 0.0) + time.monotonic() - start


@dataclass
class MeasuredBuild:
    """A server ready to measure, and what was measured on it."""

    plan: Plan
    label: str
    base_url: str
    model_name: str
    progress: Progress
    death: Callable[[], str | None] = lambda: None
    timings: dict[str, float] = field(default_factory=dict)
    records: list[RequestRecord] = field(default_factory=list)
    cells: list[CellSummary] = field(default_factory=list)
    t0: float = field(default_factory=time.perf_counter)
    next_index: int = 0
    free_max_tokens: int | None = None
    load: workload.GuidedLoad = field(init=False)
    doctor: DoctorReport | None = None  # the serving processes as the runner doctor saw them
    server_pid: int | None = None  # the server's root process, when the gate started it
    server_metrics: bool = True  # scrape vLLM's /metrics around each cell (server_wait)

    def __post_init__(self) -> None:
        self.load = workload.GuidedLoad.for_backend(self.plan.workload, self.plan.backend)

    # -- requests --------------------------------------------------------------------------
    def build_request(self, arm: str) -> Request:
        i = self.next_index
        self.next_index += 1
        body, schema = self.load.request(i, arm, self.model_name, self.free_max_tokens)
        return Request(index=i, body=body, schema=schema)

    def _send(self, cell: Cell) -> tuple[list[RequestRecord], float, SteadyWindow | None,
                                         client.WindowResult | None]:
        """Send the cell's requests: its records, its duration, and (a windowed cell) the
        window's own figures."""
        key, schemas = cell.key, {}

        def make() -> Request:
            req = self.build_request(key.arm)
            schemas[req.index] = req.schema
            return req

        done = {"n": 0}
        started = time.monotonic()

        def on_done(resp: Response) -> None:
            done["n"] += 1
            self.progress.update(f"{self.label} {cell.label}: {done['n']} done "
                                 f"{time.monotonic() - started:.1f}s")

        timeout = self.plan.workload.request_timeout_s
        window = window_for(self.plan, key, self._latency(key)) if key.phase != "warmup" else None
        result = None
        if window is not None:
            result = asyncio.run(client.run_window(
                self.base_url, make, concurrency=key.concurrency, window=window,
                timeout_s=timeout, on_done=on_done, abort=self.death))
            responses, duration = result.measured, result.end - result.start
        else:
            reqs = [make() for _ in range(cell.requests)]
            responses, start, end = asyncio.run(client.run_closed_loop(
                self.base_url, reqs, concurrency=key.concurrency, timeout_s=timeout,
                on_done=on_done, abort=self.death))
            duration = end - start
        records = [to_record(r, key, schemas.get(r.index), self.t0) for r in responses]
        return records, duration, window, result

    def _latency(self, key: CellKey) -> float:
        """A request's latency at this arm and concurrency, from the warm-up (0: unknown)."""
        warm = CellKey("warmup", key.arm, key.concurrency)
        done = sorted(r.e2el_s for r in self.records if r.key == warm and r.ok and r.e2el_s)
        return done[len(done) // 2] if done else 0.0

    # -- cells -----------------------------------------------------------------------------
    def warm_up(self) -> None:
        """Uncounted requests per arm; sets the free arm's max_tokens from the guided ones."""
        warm = self.plan.warmup
        errors: list[str] = []
        with timed(self.timings, "warmup_s"):
            for arm in warmup_arms(self.plan):
                # the guided arm sends every schema once (a corpus's, a folder's): later
                # cells hit the cache
                first = max(warm.requests,
                            self.load.distinct_schemas if arm == "guided" else 0)
                batches = [(warm.concurrency, first)] if first else []
                for c, n in batches + [(level, level) for level in warm.levels]:
                    cell = Cell(CellKey("warmup", arm, c), n)
                    records, _, _, _ = self._send(cell)
                    self.records += records
                    errors += cell_problems(records, f"{self.label} {cell.label}")
                    if arm == "guided" and batches and (c, n) == batches[0]:
                        self.free_max_tokens = free_max_tokens(self.plan, records)
        if errors:
            raise MeasurementError("warm-up requests failed, not measuring:\n  "
                                   + "\n  ".join(errors))
        self.progress(f"{self.label}: warm-up done; free requests get max_tokens "
                      f"{self.free_max_tokens or self.plan.workload.max_tokens}")

    def measure(self, cell: Cell) -> CellSummary:
        """Measure one cell (again while its streams come coalesced, within the plan's bound)
        and keep it. Raises MeasurementError when the server died."""
        per_chunk = self.plan.tokens_per_chunk()
        discarded = discarded_coalesced = 0
        while True:
            before = server_metrics.scrape(self.base_url) if self.server_metrics else None
            cpu_before = probes.read_cpu_times()
            with timed(self.timings, f"{cell.key.phase}_s"):
                records, duration, window, result = self._send(cell)
            steal = probes.steal_share(cpu_before, probes.read_cpu_times())
            after = server_metrics.scrape(self.base_url) if before is not None else None
            if reason := self.death():
                raise MeasurementError(f"{self.label}: the server died during {cell.label}: "
                                       f"{reason}")
            held_back = stream_integrity.coalesced(records, per_chunk)
            if not held_back or discarded >= self.plan.sweep.remeasure_coalesced:
                break
            self.progress(f"{self.label} {cell.label}: "
                          f"{stream_integrity.describe(records, per_chunk)}; measuring it again")
            discarded += 1
            discarded_coalesced += len(held_back)
        summary = metrics.summarize_cell(
            records, cell.key, duration, per_chunk,
            tokens_in_window=result.tokens_in_window if result else None)
        summary = summary.model_copy(update={
            "remeasured": discarded, "discarded_coalesced": discarded_coalesced,
            "warm_in_requests": result.warm_in if result else 0,
            "filler_requests": result.fillers if result else 0,
            "server_times": server_metrics.difference(before, after),
            "machine": MachineSample(steal_pct=None if steal is None else 100.0 * steal,
                                     cpu_mhz=probes.read_cpu_mhz())})
        self.records += records
        self.cells.append(summary)
        if cell.also is not None:
            also = cell.also
            self.cells.append(summary.model_copy(update={
                "phase": also.phase, "arm": also.arm, "concurrency": also.concurrency,
                "repeat": also.repeat, "window_of": cell.key.phase,
                "machine": None}))  # the runner's sample is its window's cell's, counted once
        self.progress(cell_line(self.label, cell, summary))
        return summary

    def problems(self) -> list[str]:
        """Everything that makes what was measured untrustworthy (empty when all is well)."""
        out = []
        per_chunk = self.plan.tokens_per_chunk()
        by_key: dict[CellKey, list[RequestRecord]] = {}
        for r in self.records:
            by_key.setdefault(r.key, []).append(r)
        for summary in self.cells:
            if summary.window_of is not None:  # its window's cell says what broke
                continue
            records = by_key.get(summary.key, [])
            out += cell_problems(records, summary.key.label)
            if summary.coalesced_requests:
                out.append(
                    f"{summary.key.label}: streams stayed coalesced after {summary.remeasured} "
                    f"re-measure(s): {stream_integrity.describe(records, per_chunk)}. The server held "
                    "its output back (docs/background.md#coalesced-streams); the figures of "
                    "this cell are not decode speed"
                )
        return out


def warmup_arms(plan: Plan) -> list[Arm]:
    """Guided first (it sets the free arm's max_tokens), then free, then the unique arm when
    the sweep measures it: every arm's path has run before any cell is measured."""
    arms: list[Arm] = ["guided", "free"]
    return arms + (["unique"] if "unique" in plan.sweep.arms else [])


def free_max_tokens(plan: Plan, guided_warmup: list[RequestRecord]) -> int | None:
    """max_tokens for free requests: fixed, or the guided warm-up's median output length."""
    setting = plan.workload.free_max_tokens
    if setting != "match_guided":
        return setting
    lengths = sorted(r.output_tokens for r in guided_warmup if r.ok and r.output_tokens)
    return max(2, lengths[len(lengths) // 2]) if lengths else None


def cell_line(label: str, cell: Cell, s: CellSummary) -> str:
    tpot = f"TPOT p50 {s.tpot_ms.p50:.1f} ms" if s.tpot_ms else "TPOT -"
    line = (f"{label} {cell.label}: {s.completed}/{s.requests} ok in {s.duration_s:.1f}s, "
            f"{s.output_throughput:.0f} out tok/s, {s.requests_per_min:.0f} req/min, {tpot}")
    if cell.key.arm != "free":
        line += f", {s.valid_outputs}/{s.requests} valid JSON"
    if s.ttft_ms:
        line += f", TTFT p50 {s.ttft_ms.p50:.0f} ms"
    if s.remeasured:
        line += f", measured {s.remeasured + 1} times (coalesced streams)"
    return line


@dataclass
class Launch:
    """How to get a server for a build: start one (python, env) or reach one (base_url)."""

    label: str
    out: Path  # where the server log goes
    cache_dir: Path
    python: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    base_url: str | None = None
    cpus: tuple[int, ...] | None = None  # bind the server to these CPUs (None: all the gate's)


@dataclass
class StartedServer:
    """A `vllm serve` the gate launched and has not yet waited for: starting the servers of
    an A/B's two builds before waiting for either lets their start-ups (a minute each on a
    small runner, most of it importing vLLM) overlap."""

    server: VllmServer
    timings: dict[str, float]
    started: float


def start_server(plan: Plan, launch: Launch, info: ServerInfo, progress: Progress
                 ) -> StartedServer:
    """Launch the build's server (not yet healthy). The caller stops it on every way out."""
    timings: dict[str, float] = {}
    with timed(timings, "model_s"):
        model = _model_folder(plan, launch, progress)
    info.model = model
    log_path = launch.out / "server.log"
    server = VllmServer(plan.server, model, log_path, python=launch.python, log=progress,
                        env=launch.env, cpus=launch.cpus)
    info.base_url, info.command, info.log_path = server.base_url, server.command, str(log_path)
    progress(f"{launch.label}: starting vllm serve (log: {log_path})")
    started = time.monotonic()
    server.start()
    return StartedServer(server, timings, started)


@contextlib.contextmanager
def open_measured_build(plan: Plan, launch: Launch, info: ServerInfo, progress: Progress,
                        started: StartedServer | None = None) -> Iterator[MeasuredBuild]:
    """A warmed-up measured build on a healthy server; the server (if the gate started it) is
    stopped on every way out of the block. `info` is filled in as the server comes up and goes.
    `started`: a server start_server launched already (its start-up overlapped another's)."""
    if launch.base_url:
        yield _reach(plan, launch, progress)
        return
    started = started or start_server(plan, launch, info, progress)
    server, timings = started.server, started.timings
    try:
        with timed(timings, "startup_s"):
            server.wait_healthy()
        info.startup_s = server.startup_s
        measured = MeasuredBuild(plan, launch.label, base_url=server.base_url,
                                 model_name=plan.server.served_model_name, progress=progress,
                                 death=server.death, timings=timings)
        measured.server_pid = server.pid
        measured.warm_up()
        with timed(timings, "doctor_s"):
            measured.doctor = check_runner(server, launch, progress)
        yield measured
    finally:
        with timed(timings, "shutdown_s"):
            info.exit_code = server.stop()
        progress(f"{launch.label}: server stopped")


def check_runner(server: VllmServer, launch: Launch, progress: Progress) -> DoctorReport:
    """The runner doctor on the warmed-up server's processes: what CPUs and threads they
    really use, which model runner serves (a finding that invalidates the measurement makes
    the verdict an error). Every process this gate started counts as its own on the GPUs."""
    try:
        report = doctor.examine(doctor.Examination(
            model_dir=launch.cache_dir, server_pid=server.pid, server_log=server.log_path,
            env=server.env, sample_s=0.0, probe_torch=False, gate_pid=os.getpid()))
    except GateError as exc:
        return DoctorReport(findings=[Finding(
            id="doctor.failed", severity=Severity.warning, title="the runner doctor could not "
            "read the server's processes", detail=str(exc), fix="")], served=_log_only(server))
    # torch's thread count is read from the serving processes here, not from a probe.
    report.findings = [f for f in report.findings if f.id != "cpu.torch_threads_unknown"]
    for finding in report.invalidating:
        progress(f"{launch.label}: runner doctor: {finding.title}; fix: {finding.fix}")
    runner = report.served.model_runner if report.served else None
    progress(f"{launch.label}: served by the {label(runner)}")
    return report


def _log_only(server: VllmServer) -> ServedFacts | None:
    """What the server log alone says, when its processes could not be read."""
    try:
        return doctor.served_facts([], read_server_log(server.log_path), 0)
    except OSError:
        return None


def _model_folder(plan: Plan, launch: Launch, progress: Progress) -> str:
    if plan.server.tiny_model is not None:
        return str(tiny_model.ensure(plan.server.tiny_model, launch.cache_dir, log=progress))
    model = plan.server.model
    assert model is not None  # the plan's validator requires a model folder or a tiny model
    tiny_model.check_model_folder(model)
    return model


def _reach(plan: Plan, launch: Launch, progress: Progress) -> MeasuredBuild:
    assert launch.base_url is not None  # only a launch with a URL reaches a running server
    names = client.check_server(launch.base_url)
    model_name = plan.server.served_model_name
    if model_name not in names:
        if not names:
            raise MeasurementError(f"{launch.base_url} serves no model")
        progress(f"server serves {names}; plan names {model_name!r}: using {names[0]!r}")
        model_name = names[0]
    progress(f"measuring the running server at {launch.base_url}")
    measured = MeasuredBuild(plan, launch.label, base_url=launch.base_url, model_name=model_name,
                             progress=progress)
    measured.warm_up()
    return measured
