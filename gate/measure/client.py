"""Streaming load client (aiohttp, SSE), closed loop: exactly `concurrency` requests in flight.

It reads each response stream in bulk (`iter_any`) and splits server-sent events itself, as
vLLM's own benchmark client does: reading line by line costs about a quarter of the client's
throughput (docs/background.md#client-overhead). Nothing CPU-heavy happens while requests are
in flight; JSON-schema validation runs after the cell (gate.measure.measured_build).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from gate.core.errors import GateError


@dataclass
class Request:
    index: int
    body: dict[str, Any]
    schema: dict[str, Any] | None  # guided requests only


@dataclass
class Response:
    """What the client observed for one request; times from time.perf_counter()."""

    index: int
    send: float
    ttft: float | None = None
    chunk_times: list[float] = field(default_factory=list)
    end: float | None = None
    output_tokens: int | None = None
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    status: int | None = None
    error: str | None = None
    text: str = ""

    @property
    def itl(self) -> list[float]:
        t = self.chunk_times
        return [b - a for a, b in zip(t, t[1:], strict=False)]

    @property
    def deliveries(self) -> int:
        """Separate arrivals of output text: reads of the stream that carried at least one
        content chunk. A healthy stream delivers about one per token (per engine step); a
        held-back one delivers all its chunks in one or a few reads."""
        return len(set(self.chunk_times))


def _parse_event(payload: bytes, resp: Response, now: float, parts: list[str]) -> bool:
    """Apply one SSE `data:` payload; returns True at [DONE]."""
    if payload == b"[DONE]":
        return True
    obj = json.loads(payload)
    if "error" in obj:
        err = obj["error"]
        resp.error = str(err.get("message", err) if isinstance(err, dict) else err)[:500]
        return False
    for choice in obj.get("choices") or ():
        delta = choice.get("delta") or {}
        content = delta.get("content") or choice.get("text")
        if content:
            if resp.ttft is None:
                resp.ttft = now - resp.send
            resp.chunk_times.append(now)
            parts.append(content)
        if choice.get("finish_reason"):
            resp.finish_reason = choice["finish_reason"]
    usage = obj.get("usage")
    if usage:
        resp.output_tokens = usage.get("completion_tokens")
        resp.prompt_tokens = usage.get("prompt_tokens")
    return False


async def send_one(session: aiohttp.ClientSession, url: str, req: Request,
                   resp: Response | None = None) -> Response:
    """Send one request and read its stream into `resp` (a new Response unless given: a
    caller that may cancel the request keeps the one it passed, with what had arrived)."""
    resp = resp or Response(index=req.index, send=time.perf_counter())
    resp.send = time.perf_counter()
    parts: list[str] = []
    try:
        async with session.post(url, json=req.body) as http:
            resp.status = http.status
            if http.status != 200:
                resp.error = f"HTTP {http.status}: {(await http.text())[:500]}"
                return resp
            buf = b""
            done = False
            async for data in http.content.iter_any():
                now = time.perf_counter()
                buf += data
                while not done and b"\n\n" in buf:
                    event, buf = buf.split(b"\n\n", 1)
                    for line in event.splitlines():
                        if line.startswith(b"data:"):
                            done = _parse_event(line[5:].strip(), resp, now, parts) or done
            if not done and resp.error is None:
                resp.error = "stream ended without [DONE]"
    except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
        resp.error = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        resp.end = time.perf_counter()
        resp.text = "".join(parts)
    if resp.error is None and resp.output_tokens is None:
        resp.error = "no usage block in the stream (stream_options.include_usage ignored?)"
    return resp


async def run_closed_loop(
    base_url: str,
    requests: Iterable[Request],
    *,
    concurrency: int,
    timeout_s: float,
    on_done: Callable[[Response], None] | None = None,
    abort: Callable[[], str | None] | None = None,
) -> tuple[list[Response], float, float]:
    """Send `requests` keeping `concurrency` in flight; returns (responses, start, end).

    `abort` is polled between requests: when it returns a reason (the server died), workers
    stop taking new requests and the reason is recorded on the requests never sent.
    """
    url = base_url.rstrip("/") + "/v1/chat/completions"
    queue = list(requests)
    pending = iter(queue)
    responses: list[Response] = []
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    aborted: list[str] = []

    async def worker(session: aiohttp.ClientSession) -> None:
        for req in pending:
            reason = abort() if abort else None
            if reason:
                aborted.append(reason)
                responses.append(Response(index=req.index, send=time.perf_counter(),
                                          end=time.perf_counter(), error=f"not sent: {reason}"))
                continue
            resp = await send_one(session, url, req)
            responses.append(resp)
            if on_done:
                on_done(resp)

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(min(concurrency, len(queue)))))
        end = time.perf_counter()
    responses.sort(key=lambda r: r.index)
    return responses, start, end


@dataclass
class SteadyWindow:
    """A time-sized cell: measure `seconds` of steady state, at least `min_requests` sent in
    it, at most `max_seconds` in all (then the window closes with what it has)."""

    seconds: float
    min_requests: int
    max_seconds: float
    # Slot i sends its first request i/c of this many seconds after slot 0 (about one request's
    # latency): a closed loop whose slots all start together runs in lockstep waves, and
    # whether it stays in step or drifts apart changes its step time (bimodal cells).
    stagger_s: float = 0.0


@dataclass(kw_only=True)
class WindowResult:
    measured: list[Response]  # sent inside the window, run to completion under full load
    start: float  # the window: [start, end), perf_counter() seconds
    end: float
    warm_in: int  # requests sent before the window opened (not measured)
    fillers: int  # requests that kept the load on after it closed (cancelled, not measured)
    tokens_in_window: float = 0.0  # output tokens that arrived inside the window, any request


def tokens_between(responses: Iterable[Response], start: float, end: float) -> float:
    """Output tokens that arrived in [start, end), from every stream's chunk arrival times: a
    throughput that does not depend on where request boundaries fall in the window (requests
    of a closed loop finish in waves). A chunk carries output_tokens / chunks tokens of its
    request (one without a usage block, cancelled, counts one per chunk)."""
    total = 0.0
    for r in responses:
        if not r.chunk_times:
            continue
        per_chunk = (r.output_tokens / len(r.chunk_times)) if r.output_tokens else 1.0
        total += per_chunk * sum(1 for t in r.chunk_times if start <= t < end)
    return total


class _WindowState:
    """Which requests belong to the window, and when the cell is done."""

    def __init__(self, window: SteadyWindow, concurrency: int):
        self.window = window
        self.concurrency = concurrency
        # The window opens at the first request to complete once every slot has sent: with
        # staggered starts a fast first request can finish before the last slot sends, and a
        # window opened then would measure a loop that is not yet at its concurrency.
        self.slots_started = 0
        self.start: float | None = None
        self.end: float | None = None  # closes once seconds and min_requests are both met
        self.measured: list[Response] = []
        self.failed: list[Response] = []  # any failed request ends the cell (it is an error)
        self.every: list[Response] = []  # every request sent, for the window's token flow
        self.in_flight_measured = 0
        self.warm_in = 0
        self.fillers = 0
        self.done = asyncio.Event()

    def classify_send(self, now: float) -> str:
        if self.start is None:
            return "warm_in"
        if self.end is None:
            open_for = now - self.start
            enough = len(self.measured) + self.in_flight_measured >= self.window.min_requests
            if (open_for >= self.window.seconds and enough) or open_for >= self.window.max_seconds:
                self.end = now
            else:
                return "measured"
        return "filler"

    def sent(self, kind: str) -> None:
        if kind == "measured":
            self.in_flight_measured += 1
        elif kind == "warm_in":
            self.warm_in += 1
        else:
            self.fillers += 1

    def finished(self, kind: str, resp: Response) -> None:
        if kind == "measured":
            self.in_flight_measured -= 1
            self.measured.append(resp)
        if resp.error is not None:
            if kind != "measured":
                self.failed.append(resp)
            self.done.set()
        elif self.start is None and self.slots_started >= self.concurrency:
            self.start = resp.end
        if self.end is not None and self.in_flight_measured == 0:
            self.done.set()


async def _window_worker(session: aiohttp.ClientSession, url: str, *,
                         make_request: Callable[[], Request], state: _WindowState,
                         on_done: Callable[[Response], None] | None,
                         abort: Callable[[], str | None] | None) -> None:
    """One slot of the closed loop: send, wait, send again, until the window's cell is done."""
    first = True
    while not state.done.is_set():
        req = make_request()
        if reason := (abort() if abort else None):
            now = time.perf_counter()
            state.failed.append(Response(index=req.index, send=now, end=now,
                                         error=f"not sent: {reason}"))
            state.done.set()
            return
        kind = state.classify_send(time.perf_counter())
        if kind == "filler" and state.in_flight_measured == 0:
            state.done.set()
            return
        state.sent(kind)
        if first:
            state.slots_started += 1
            first = False
        resp = Response(index=req.index, send=time.perf_counter())
        state.every.append(resp)
        await send_one(session, url, req, resp)
        state.finished(kind, resp)
        if on_done and kind == "measured":
            on_done(resp)


async def run_window(
    base_url: str,
    make_request: Callable[[], Request],
    *,
    concurrency: int,
    window: SteadyWindow,
    timeout_s: float,
    on_done: Callable[[Response], None] | None = None,
    abort: Callable[[], str | None] | None = None,
) -> WindowResult:
    """A closed loop with `concurrency` requests in flight that measures a steady-state window.

    The window opens when the first request completes (every slot has been busy since the
    start) and closes after `window.seconds` once `window.min_requests` were sent in it. The
    requests sent inside it are the cell; the loop keeps sending filler requests until they
    have all finished, so every measured request ran under the same load, then cancels the
    fillers (the server aborts a request whose client went away). The window's throughput is
    its token flow: the output tokens every stream delivered inside it (tokens_between). A
    failed request ends the cell: it is returned with the measured ones."""
    url = base_url.rstrip("/") + "/v1/chat/completions"
    state = _WindowState(window, concurrency)

    async def worker(session: aiohttp.ClientSession, slot: int) -> None:
        if window.stagger_s > 0:
            await asyncio.sleep(window.stagger_s * slot / concurrency)
        await _window_worker(session, url, make_request=make_request, state=state, on_done=on_done,
                             abort=abort)

    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        tasks = [asyncio.create_task(worker(session, i)) for i in range(concurrency)]
        workers: asyncio.Future = asyncio.gather(*tasks, return_exceptions=True)
        done: asyncio.Future = asyncio.create_task(state.done.wait())
        await asyncio.wait([done, workers], return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:  # fillers still in flight
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await workers
        done.cancel()
    now = time.perf_counter()
    start = state.start if state.start is not None else now
    end = state.end if state.end is not None else now
    responses = sorted(state.measured + state.failed, key=lambda r: r.index)
    return WindowResult(measured=responses, start=start, end=end, warm_in=state.warm_in,
                        fillers=state.fillers,
                        tokens_in_window=tokens_between(state.every, start, end))


async def _get(base_url: str, path: str, timeout_s: float) -> tuple[int, Any]:
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as s, s.get(base_url.rstrip("/") + path) as r:
        body = await r.text()
        try:
            return r.status, json.loads(body)
        except ValueError:
            return r.status, body


def check_server(base_url: str, timeout_s: float = 10.0) -> list[str]:
    """The served model names of a running server; a clear error when it is unreachable."""
    try:
        status, _ = asyncio.run(_get(base_url, "/health", timeout_s))
        if status != 200:
            raise GateError(f"server at {base_url} is not healthy: GET /health answered {status}")
        status, models = asyncio.run(_get(base_url, "/v1/models", timeout_s))
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise GateError(f"cannot reach a vLLM server at {base_url}: {exc}") from None
    if status != 200 or not isinstance(models, dict):
        raise GateError(f"{base_url}/v1/models answered {status}: not an OpenAI-compatible server")
    return [str(m["id"]) for m in models.get("data", []) if isinstance(m, dict) and "id" in m]
