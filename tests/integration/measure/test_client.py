"""The streaming client against a real HTTP server on 127.0.0.1 that speaks vLLM's SSE format
(support/openai_stream.py), in this process, so that a test can count what it saw."""

import asyncio
import socket
import threading
import time

import pytest
from aiohttp import web
from support.openai_stream import chunk, open_stream, role_chunk, usage_tail

from gate.measure.client import Request, SteadyWindow, run_closed_loop, run_window


class FakeVllm:
    """Streams `tokens` chunks per request, tracks the peak number of requests in flight."""

    def __init__(self, tokens=5, delay=0.002, status=200, break_stream=False):
        self.tokens, self.delay, self.status, self.break_stream = tokens, delay, status, break_stream
        self.in_flight = 0
        self.peak = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if self.status != 200:
            return web.json_response({"error": "bad"}, status=self.status)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        resp = await open_stream(request)
        await resp.write(role_chunk())
        for i in range(self.tokens):
            await asyncio.sleep(self.delay)
            last = i == self.tokens - 1
            await resp.write(chunk(f"t{i}", "stop" if last else None))
        self.in_flight -= 1
        if self.break_stream:
            return resp
        await resp.write(usage_tail(self.tokens, prompt_tokens=3))
        assert body["stream"] is True
        return resp


@pytest.fixture
def serve():
    servers = []

    def start(fake: FakeVllm) -> str:
        loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", fake.handle)
        runner = web.AppRunner(app)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        servers.append((loop, runner, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for loop, runner, thread in servers:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def reqs(n):
    return [Request(index=i, body={"stream": True, "messages": []}, schema=None) for i in range(n)]


def test_records_every_chunk_and_usage(serve):
    url = serve(FakeVllm(tokens=5, delay=0.01))
    responses, start, end = asyncio.run(run_closed_loop(url, reqs(3), concurrency=2, timeout_s=10))
    assert len(responses) == 3 and end > start
    for r in responses:
        assert r.error is None and r.status == 200
        assert r.text == "t0t1t2t3t4"
        assert r.output_tokens == 5 and r.prompt_tokens == 3
        assert r.finish_reason == "stop"
        assert len(r.itl) == 4 and all(gap >= 0 for gap in r.itl)
        assert 0 < r.ttft < r.end - r.send


def test_closed_loop_keeps_exactly_c_in_flight(serve):
    fake = FakeVllm(tokens=3, delay=0.02)
    url = serve(fake)
    asyncio.run(run_closed_loop(url, reqs(12), concurrency=4, timeout_s=10))
    assert fake.peak == 4


def test_http_errors_are_recorded_not_raised(serve):
    url = serve(FakeVllm(status=400))
    responses, _, _ = asyncio.run(run_closed_loop(url, reqs(2), concurrency=2, timeout_s=10))
    assert all(r.status == 400 and r.error.startswith("HTTP 400") for r in responses)


def test_a_stream_cut_short_is_an_error(serve):
    url = serve(FakeVllm(break_stream=True))
    (r,), _, _ = asyncio.run(run_closed_loop(url, reqs(1), concurrency=1, timeout_s=10))
    assert r.error == "stream ended without [DONE]"


def test_unreachable_server_is_an_error_per_request():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    (r,), _, _ = asyncio.run(run_closed_loop(f"http://127.0.0.1:{port}", reqs(1), concurrency=1,
                                             timeout_s=5))
    assert r.error and "ClientConnectorError" in r.error


def test_abort_stops_sending(serve):
    url = serve(FakeVllm())
    responses, _, _ = asyncio.run(run_closed_loop(url, reqs(3), concurrency=1, timeout_s=10,
                                                  abort=lambda: "server died"))
    assert [r.error for r in responses] == ["not sent: server died"] * 3


def test_a_window_measures_the_requests_sent_inside_it_under_full_load(serve):
    fake = FakeVllm(tokens=5, delay=0.02)  # ~0.1 s per request
    url = serve(fake)
    counter = iter(range(10_000))

    def make():
        return Request(index=next(counter), body={"stream": True, "messages": []}, schema=None)

    window = SteadyWindow(seconds=0.6, min_requests=8, max_seconds=5)
    result = asyncio.run(run_window(url, make, concurrency=4, window=window, timeout_s=10))
    assert result.warm_in >= 4 and fake.peak == 4
    assert len(result.measured) >= 8 and all(r.error is None for r in result.measured)
    assert all(result.start <= r.send < result.end for r in result.measured)
    assert 0.6 <= result.end - result.start <= 5.0
    # Little's law on this run's own latency (a loaded machine stretches both alike): the
    # window counts the sends of 4 busy slots, about 4 / latency per second.
    latency = sum(r.end - r.send for r in result.measured) / len(result.measured)
    rate = len(result.measured) / (result.end - result.start)
    assert 0.5 * 4 / latency < rate < 1.5 * 4 / latency
    assert all(r.deliveries == 5 for r in result.measured)


def test_a_window_stops_at_the_first_failure(serve):
    url = serve(FakeVllm(status=500))
    counter = iter(range(100))

    def make():
        return Request(index=next(counter), body={"stream": True, "messages": []}, schema=None)

    result = asyncio.run(run_window(url, make, concurrency=2, window=SteadyWindow(1.0, 2, 5),
                                    timeout_s=10))
    assert result.measured and all(r.error.startswith("HTTP 500") for r in result.measured)


def test_tokens_between_counts_every_streams_arrivals_in_the_window():
    from gate.measure.client import Response, tokens_between

    a = Response(index=0, send=0.0, chunk_times=[0.5, 1.0, 1.5, 2.5], output_tokens=8)
    b = Response(index=1, send=0.0, chunk_times=[1.2, 1.9])  # cancelled: no usage block
    assert tokens_between([a, b], 1.0, 2.0) == pytest.approx(2 * 2 + 2)


def test_staggered_slots_start_spread_over_the_given_time(serve):
    # Each request outlasts the stagger (3 tokens x 0.2 s), so the first four sends are the
    # four slots' first sends, not slot 0 coming back for its second request.
    fake = FakeVllm(tokens=3, delay=0.2)
    url = serve(fake)
    counter = iter(range(10_000))
    sends = []

    def make():
        sends.append(time.perf_counter())
        return Request(index=next(counter), body={"stream": True, "messages": []}, schema=None)

    asyncio.run(run_window(url, make, concurrency=4, window=SteadyWindow(0.3, 4, 5, stagger_s=0.4),
                           timeout_s=10))
    first_four = sends[:4]
    assert 0.25 <= first_four[-1] - first_four[0] <= 0.9  # slot 3 starts 3/4 of 0.4 s later


def test_the_window_opens_only_once_every_slot_has_sent(serve):
    # A request (2 tokens x 0.05 s) is far shorter than the stagger (1 s): slot 0 completes
    # several times before slot 3 first sends. Every slot's first send is warm-in, and every
    # measured request was sent after the last slot joined the loop.
    fake = FakeVllm(tokens=2, delay=0.05)
    url = serve(fake)
    counter = iter(range(10_000))
    sends: dict[int, float] = {}

    def make():
        index = next(counter)
        sends[index] = time.perf_counter()
        return Request(index=index, body={"stream": True, "messages": []}, schema=None)

    result = asyncio.run(run_window(url, make, concurrency=4,
                                    window=SteadyWindow(0.3, 4, 5, stagger_s=1.0), timeout_s=10))
    assert result.warm_in >= 4
    last_slot_joined = sorted(sends.values())[:result.warm_in][-1]
    assert result.start >= last_slot_joined
    assert all(r.send >= result.start for r in result.measured)
