"""`gate run`: measure a real vLLM server with the guided-JSON drain and the concurrency sweep.

Start (or reach) the server, warm up, then per repeat: the drain, then the sweep cells in the
plan's order. Validate guided outputs after each cell, summarise with vLLM's metric
definitions, and write results.json. The server is stopped on every exit path.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gate import client, fingerprint, metrics, tiny_model, workload
from gate.client import Request, Response
from gate.errors import MeasurementError
from gate.plan import Plan
from gate.progress import Progress
from gate.results import (
    CellIndex,
    CellKey,
    CellSummary,
    RequestRecord,
    Results,
    ServerInfo,
    save_results,
)
from gate.server import VllmServer


@dataclass(frozen=True)
class Cell:
    """A cell to measure: which one, and how many requests it sends."""

    key: CellKey
    requests: int

    @property
    def label(self) -> str:
        return self.key.label


def cells_for_repeat(plan: Plan, repeat: int) -> list[Cell]:
    """The measured cells of one repeat: the drain, then the sweep. Interleaved order flips
    which arm goes first at every level, so neither arm always runs on a warmer server."""
    cells = []
    if plan.drain.enabled:
        key = CellKey("drain", "guided", plan.drain.concurrency, repeat)
        cells.append(Cell(key, plan.drain.requests))
    if not plan.sweep.enabled:
        return cells
    sweep = plan.sweep

    def n_requests(level: int) -> int:
        return max(sweep.requests_per_cell, sweep.min_requests_factor * level)

    def sweep_cell(arm: str, level: int) -> Cell:
        return Cell(CellKey("sweep", arm, level, repeat), n_requests(level))  # type: ignore[arg-type]

    if sweep.order == "blocked":
        for arm in sweep.arms:
            cells += [sweep_cell(arm, lv) for lv in sweep.levels]
        return cells
    for i, level in enumerate(sweep.levels):
        arms = sweep.arms if (i + repeat) % 2 == 0 else list(reversed(sweep.arms))
        cells += [sweep_cell(arm, level) for arm in arms]
    return cells


@dataclass
class Measurement:
    """Running state of one `gate run`: the requests built so far and their records."""

    plan: Plan
    model_name: str
    prompts: list[str] = field(default_factory=list)
    next_index: int = 0
    records: list[RequestRecord] = field(default_factory=list)
    cells: list[CellSummary] = field(default_factory=list)
    free_max_tokens: int | None = None

    def build_requests(self, cell: Cell) -> list[Request]:
        spec = self.plan.workload
        reqs = []
        for _ in range(cell.requests):
            i = self.next_index
            self.next_index += 1
            guided = cell.key.arm == "guided"
            schema = workload.schema_for(spec, i) if guided else None
            prompt = self.prompts[i % len(self.prompts)]
            body = workload.request_body(spec, self.model_name, prompt, guided, schema,
                                         self.free_max_tokens)
            reqs.append(Request(index=i, body=body, schema=schema))
        return reqs


def to_record(resp: Response, cell: Cell, schema: dict | None, t0: float) -> RequestRecord:
    key = cell.key
    rec = RequestRecord(
        index=resp.index, phase=key.phase, arm=key.arm, concurrency=key.concurrency,
        repeat=key.repeat, send_s=resp.send - t0, ttft_s=resp.ttft,
        itl_s=resp.itl, e2el_s=(resp.end - resp.send) if resp.end is not None else None,
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


def run_cell(m: Measurement, cell: Cell, base_url: str, t0: float, progress: Progress,
             death: Callable[[], str | None]) -> tuple[list[RequestRecord], float, float]:
    reqs = m.build_requests(cell)
    schemas = {r.index: r.schema for r in reqs}
    done = {"ok": 0, "failed": 0}
    started = time.monotonic()

    def on_done(resp: Response) -> None:
        done["ok" if resp.error is None else "failed"] += 1
        progress.update(f"{cell.label}: {done['ok'] + done['failed']}/{cell.requests} "
                        f"({done['failed']} failed) {time.monotonic() - started:.1f}s")

    responses, start, end = asyncio.run(client.run_closed_loop(
        base_url, reqs, cell.key.concurrency, m.plan.workload.request_timeout_s, on_done, death))
    records = [to_record(r, cell, schemas[r.index], t0) for r in responses]
    return records, start, end


def measure(plan: Plan, base_url: str, model_name: str, progress: Progress,
            death: Callable[[], str | None], timings: dict[str, float]) -> Measurement:
    m = Measurement(plan=plan, model_name=model_name, prompts=workload.prompts(plan.workload))
    t0 = time.perf_counter()
    errors: list[str] = []
    with _timed(timings, "warmup_s"):
        for arm in ("guided", "free"):
            if plan.warmup.requests:
                cell = Cell(CellKey("warmup", arm, plan.warmup.concurrency), plan.warmup.requests)
                records, _, _ = run_cell(m, cell, base_url, t0, progress, death)
                m.records += records
                errors += cell_problems(records, cell.label)
                if arm == "guided":
                    m.free_max_tokens = free_max_tokens(plan, records)
        progress(f"warm-up done ({plan.warmup.requests} guided + {plan.warmup.requests} free); "
                 f"free requests get max_tokens {m.free_max_tokens or plan.workload.max_tokens}")
    if errors:
        raise MeasurementError("warm-up requests failed, not measuring:\n  " + "\n  ".join(errors))
    for repeat in range(plan.repeats):
        for cell in cells_for_repeat(plan, repeat):
            with _timed(timings, f"{cell.key.phase}_s"):
                records, start, end = run_cell(m, cell, base_url, t0, progress, death)
            summary = metrics.summarize_cell(records, cell.key, end - start)
            m.records += records
            m.cells.append(summary)
            progress(_cell_line(cell, summary))
            if reason := death():
                raise MeasurementError(f"the server died during {cell.label}: {reason}")
    return m


def free_max_tokens(plan: Plan, guided_warmup: list[RequestRecord]) -> int | None:
    """max_tokens for free requests: fixed, or the guided warm-up's median output length."""
    setting = plan.workload.free_max_tokens
    if setting != "match_guided":
        return setting
    lengths = sorted(r.output_tokens for r in guided_warmup if r.ok and r.output_tokens)
    return max(2, lengths[len(lengths) // 2]) if lengths else None


def _cell_line(cell: Cell, s: CellSummary) -> str:
    tpot = f"TPOT p50 {s.tpot_ms.p50:.1f} ms" if s.tpot_ms else "TPOT -"
    line = (f"{cell.label}: {s.completed}/{s.requests} ok in {s.duration_s:.1f}s, "
            f"{s.output_throughput:.0f} out tok/s, {s.requests_per_min:.0f} req/min, {tpot}")
    if cell.key.arm == "guided":
        line += f", {s.valid_outputs}/{s.requests} valid JSON"
    return line


@contextlib.contextmanager
def _timed(timings: dict[str, float], key: str) -> Iterator[None]:
    start = time.monotonic()
    try:
        yield
    finally:
        timings[key] = timings.get(key, 0.0) + time.monotonic() - start


@dataclass
class RunOptions:
    out: Path
    cache_dir: Path  # where the tiny model is built (Settings.cache_dir)
    base_url: str | None = None
    python: str | None = None
    label: str = "head"
    env: dict[str, str] = field(default_factory=dict)  # this build's environment (A/B arms)


def execute(plan: Plan, opts: RunOptions, progress: Progress) -> Results:
    """Run the whole measurement; always returns Results (status error on a broken run)."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    opts.out.mkdir(parents=True, exist_ok=True)
    log_path = opts.out / "server.log"
    server_env = {**os.environ, **plan.server.env, **opts.env}
    with _timed(timings, "fingerprint_s"):
        fp = fingerprint.collect(python=opts.python or plan.server.python, env=server_env)
    info = ServerInfo(base_url=opts.base_url or "", started_by_gate=opts.base_url is None,
                      model=plan.server.model or "tiny", env_overrides=opts.env)
    measurement: Measurement | None = None
    errors: list[str] = []
    try:
        if opts.base_url:
            measurement = _measure_running(plan, opts.base_url, progress, timings)
        else:
            measurement = _measure_launched(plan, opts, log_path, info, progress, timings)
    except MeasurementError as exc:
        errors.append(str(exc))
        progress(f"measurement error: {str(exc).splitlines()[0]}")
    timings["total_s"] = time.monotonic() - started
    return _results(plan, opts, fp, info, measurement, errors, timings)


def _measure_running(plan, base_url, progress, timings) -> Measurement:
    names = client.check_server(base_url)
    model_name = plan.server.served_model_name
    if model_name not in names:
        if not names:
            raise MeasurementError(f"{base_url} serves no model")
        progress(f"server serves {names}; plan names {model_name!r}: using {names[0]!r}")
        model_name = names[0]
    progress(f"measuring the running server at {base_url}")
    return measure(plan, base_url, model_name, progress, lambda: None, timings)


def _measure_launched(plan, opts, log_path, info, progress, timings) -> Measurement:
    with _timed(timings, "model_s"):
        if plan.server.tiny_model is not None:
            model = str(tiny_model.ensure(plan.server.tiny_model, opts.cache_dir, log=progress))
        else:
            model = plan.server.model
            tiny_model.check_model_folder(model)
    info.model = model
    server = VllmServer(plan.server, model, log_path, python=opts.python, log=progress,
                        env=opts.env)
    info.base_url, info.command, info.log_path = server.base_url, server.command, str(log_path)
    progress(f"starting vllm serve (log: {log_path})")
    try:
        with _timed(timings, "startup_s"):
            server.start()
            server.wait_healthy()
        info.startup_s = server.startup_s
        return measure(plan, server.base_url, plan.server.served_model_name, progress,
                       server.death, timings)
    finally:
        with _timed(timings, "shutdown_s"):
            info.exit_code = server.stop()
        progress("server stopped")


def _results(plan, opts, fp, info, m: Measurement | None, errors, timings) -> Results:
    records = m.records if m else []
    cells = m.cells if m else []
    index = CellIndex(cells, records)
    for cell in cells:
        errors += cell_problems(index.records(cell.key), cell.key.label)
    return Results(
        label=opts.label,
        created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        plan=plan, plan_hash=plan.measurement_hash(), fingerprint=fp, server=info,
        status="error" if errors else "complete", errors=errors, timings_s=timings,
        cells=cells, ratios=metrics.level_ratios(cells), records=records,
    )


def write(results: Results, out: Path) -> Path:
    """results.json, unless that would replace a stored result with a broken one."""
    path = out / "results.json"
    if results.status != "complete" and path.exists():
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        path = out / f"results.{results.status}-{stamp}.json"
    save_results(results, path)
    return path
