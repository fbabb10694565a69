"""The OpenAI streaming chat API as vLLM writes it, for the stand-in servers of the tests
(support/fake_vllm.py) and the benchmarks (benchmarks/zero_work_server.py): one SSE event per
chunk, the usage block, then [DONE]; /v1/models and /health beside it."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def event(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def role_chunk(model: str = "m") -> bytes:
    """The first chunk of a stream: the assistant's role, no text yet."""
    return event({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": model,
                  "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                               "finish_reason": None}]})


def chunk(text: str, finish: str | None = None, model: str = "m") -> bytes:
    """One streamed token (vLLM sends one chunk per engine step and request)."""
    return event({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": model,
                  "choices": [{"index": 0, "delta": {"content": text},
                               "finish_reason": finish}]})


def usage_tail(completion_tokens: int, prompt_tokens: int = 8) -> bytes:
    """The usage block (stream_options.include_usage) and the end of the stream."""
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}
    return event({"id": "x", "object": "chat.completion.chunk", "choices": [],
                  "usage": usage}) + b"data: [DONE]\n\n"


async def open_stream(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    return resp


def stream_app(completions: Handler, served_name: str) -> web.Application:
    """An app that serves `completions` on /v1/chat/completions, lists `served_name` as its
    one model and answers /health."""

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list",
                                  "data": [{"id": served_name, "object": "model"}]})

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    return app
