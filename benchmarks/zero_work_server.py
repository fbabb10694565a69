"""A zero-work OpenAI-compatible streaming server on 127.0.0.1 for client benchmarks.

Every chat completion streams `--tokens` chunks (one token each, vLLM's chunk format), then
the usage block and [DONE], as fast as the event loop can write them; `--burst` writes the
whole response in one write. Run it on its own core (taskset) so the client's cost shows.
"""

import argparse
import json

from aiohttp import web


def chunk(i: int) -> bytes:
    obj = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "zero",
           "choices": [{"index": 0, "delta": {"content": f" t{i}"}, "finish_reason": None}]}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def make_app(tokens: int, burst: bool) -> web.Application:
    chunks = [chunk(i) for i in range(tokens)]
    usage = {"id": "x", "object": "chat.completion.chunk", "choices": [],
             "usage": {"prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": tokens + 8}}
    tail = b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n"
    whole = b"".join(chunks) + tail

    async def completions(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if burst:
            await resp.write(whole)
        else:
            for c in chunks:
                await resp.write(c)
            await resp.write(tail)
        return resp

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "zero", "object": "model"}]})

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    return app


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--burst", action="store_true")
    args = ap.parse_args()
    web.run_app(make_app(args.tokens, args.burst), host="127.0.0.1", port=args.port,
                print=None, access_log=None)
