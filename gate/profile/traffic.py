"""The guided load that `gate profile record` keeps on a vLLM server while gate.profile.sampling's
sampler runs its windows: the gate's own client and request bodies (as `gate run` builds its
drain's), the output tokens of each stream chunk, and the checks that make a broken load an
error rather than a profile."""

from __future__ import annotations

import asyncio
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from gate.core.errors import MeasurementError
from gate.measure import client
from gate.measure.client import Request, Response
from gate.plan import workload
from gate.plan.spec import Plan
from gate.profile.data import BuildProfile, ProcessInfo, save_build_profile
from gate.profile.sampling import (
    SPEEDSCOPE_FILE,
    WINDOW_OVER,
    SampledLoad,
    Sampler,
    SamplingOptions,
    WindowRecording,
    assemble_profile,
    find_py_spy,
    merge_speedscope,
    pid_listening_on,
    server_processes,
)


def guided_requests(plan: Plan, model: str, first: int, count: int) -> list[Request]:
    """Guided requests built as `gate run` builds its drain's (same prompts and schemas)."""
    load = workload.GuidedLoad.for_backend(plan.workload, plan.backend)
    out = []
    for i in range(first, first + count):
        body, schema = load.request(i, "guided", model)
        out.append(Request(index=i, body=body, schema=schema))
    return out


def token_events(responses: Iterable[Response]) -> list[tuple[float, float]]:
    """(arrival time, tokens) of every stream chunk; a response's output tokens are spread
    evenly over its chunks (a chunk usually carries one token, some carry none or several)."""
    events = []
    for r in responses:
        if r.error is None and r.output_tokens and r.chunk_times:
            share = r.output_tokens / len(r.chunk_times)
            events += [(t, share) for t in r.chunk_times]
    return events


def load_problems(responses: Sequence[Response], requests: Sequence[Request]) -> list[str]:
    """Failed requests and invalid guided outputs (requests left unsent at the end of the
    windows are not failures)."""
    schemas = {r.index: r.schema for r in requests}
    sent = [r for r in responses if r.error != f"not sent: {WINDOW_OVER}"]
    failed = [r for r in sent if r.error is not None]
    problems = []
    if failed:
        problems.append(f"{len(failed)} of {len(sent)} requests failed (first: {failed[0].error})")
    invalid = [(r, why) for r in sent if r.error is None and (schema := schemas.get(r.index))
               and (why := workload.validate_output(r.text, schema))]
    if invalid:
        problems.append(f"{len(invalid)} of {len(sent)} guided outputs do not follow the schema "
                        f"(first: {invalid[0][1]})")
    return problems


@dataclass
class ServerLoad:
    base_url: str
    plan: Plan
    model: str
    concurrency: int
    req_per_s: float = 0.0  # the warm-up's pace, which sizes the load kept on while sampling

    def run(self, reqs: list[Request],
            abort: Callable[[], str | None]) -> tuple[list[Response], float, float]:
        timeout = self.plan.workload.request_timeout_s
        return asyncio.run(client.run_closed_loop(self.base_url, reqs,
                                                  concurrency=self.concurrency,
                                                  timeout_s=timeout, abort=abort))

    def warm_up(self) -> float:
        """Two batches of guided requests (compiles the grammar); returns requests per second."""
        reqs = guided_requests(self.plan, self.model, 0, 2 * self.concurrency)
        responses, start, end = self.run(reqs, lambda: None)
        if problems := load_problems(responses, reqs):
            raise MeasurementError("profile warm-up: " + "; ".join(problems))
        return len(responses) / max(end - start, 1e-3)


@dataclass(frozen=True)
class ProfileTarget:
    """The server to profile: its URL, the build's label, its process tree's root (default:
    whoever listens on the URL's port) and the guided load's concurrency (default: the
    plan's drain's)."""

    base_url: str
    label: str = "head"
    pid: int | None = None
    concurrency: int | None = None


def profile_server(target: ProfileTarget, plan: Plan, out: Path, opts: SamplingOptions, *,
                   roots: Sequence[str | Path] = (), log: Callable[[str], None] = print,
                   ) -> BuildProfile:
    """Sample the server during a guided load; writes DIR/profile.json,
    DIR/profile.speedscope.json and py-spy's own files under DIR/raw/, only on success."""
    base_url, label, pid, concurrency = target.base_url, target.label, target.pid, target.concurrency
    opts.check()
    find_py_spy()  # before the server is loaded: without py-spy, fail at once, for nothing
    names = client.check_server(base_url)
    if not names:
        raise MeasurementError(f"{base_url} serves no model")
    model = plan.server.served_model_name if plan.server.served_model_name in names else names[0]
    root = pid or pid_listening_on(base_url)
    processes = server_processes(root)
    log(f"sampling {', '.join(f'{p.role} (pid {p.pid})' for p in processes)} at "
        f"{opts.rate_hz} Hz, {opts.windows} windows of {opts.window_s}s")
    load = ServerLoad(base_url, plan, model, concurrency or plan.drain.concurrency)
    load.req_per_s = load.warm_up()
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".raw-", dir=out))
    try:
        recordings, responses, t0 = sample_under_load(load, processes, opts=opts, raw_dir=scratch,
                                                      root=root, log=log)
        done = [r for r in responses if r.error is None]
        sampled = SampledLoad(recordings, processes, token_events(done), t0)
        profile = assemble_profile(sampled, opts, label=label, source=base_url, roots=roots,
                                   requests=len(done))
        merge_speedscope(recordings, out / SPEEDSCOPE_FILE, f"{label} build")
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    shutil.rmtree(out / "raw", ignore_errors=True)
    scratch.rename(out / "raw")
    save_build_profile(profile, out)
    return profile


def sample_under_load(load: ServerLoad, processes: list[ProcessInfo], *, opts: SamplingOptions,
                      raw_dir: Path, root: int, log: Callable[[str], None],
                      ) -> tuple[list[WindowRecording], list[Response], float]:
    """Keep the guided load on while the sampler runs its windows, then stop sending.
    Returns the windows, the responses and the load's start (time.perf_counter)."""
    # Enough requests to outlast the windows six times over at the warm-up's pace: the load
    # stops once the windows are done, so a long list costs nothing, and a warm-up measured
    # while the machine was busy must not leave the windows without traffic.
    span = opts.settle_s + opts.windows * (opts.window_s + 1.0)
    count = math.ceil(6 * load.req_per_s * span) + 2 * load.concurrency
    reqs = guided_requests(load.plan, load.model, 2 * load.concurrency, count)
    sampler = Sampler(processes, opts, raw_dir, log=log)

    def abort() -> str | None:
        if not psutil.pid_exists(root):
            return f"the server (pid {root}) exited"
        return sampler.abort_reason()

    t0 = time.perf_counter()
    sampler.start()
    try:
        responses = load.run(reqs, abort)[0]
        ran_out = not sampler.done.is_set()
    finally:
        if not sampler.done.is_set():
            sampler.stop()
    if ran_out:
        # said first: stopping the sampler killed its py-spys, whose failure is this one's
        raise MeasurementError(f"the guided load ended (all {count} requests done) before the "
                               "sampling windows did: the server sped up after the warm-up")
    if sampler.error is not None:
        sampler.result()  # raises the sampling failure, the cause of any unsent requests
    if problems := load_problems(responses, reqs):
        raise MeasurementError("profile load: " + "; ".join(problems))
    return sampler.result(), responses, t0
