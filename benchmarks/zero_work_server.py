"""A zero-work OpenAI-compatible streaming server on 127.0.0.1 for client benchmarks.

Every chat completion streams `--tokens` chunks (one token each, vLLM's chunk format), then
the usage block and [DONE], as fast as the event loop can write them; `--burst` writes the
whole response in one write. Run it on its own core (taskset) so the client's cost shows.
"""

import argparse
import sys
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the stream writer
from support.openai_stream import chunk, open_stream, stream_app, usage_tail  # noqa: E402


def make_app(tokens: int, burst: bool) -> web.Application:
    chunks = [chunk(f" t{i}", model="zero") for i in range(tokens)]
    tail = usage_tail(tokens)
    whole = b"".join(chunks) + tail

    async def completions(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = await open_stream(request)
        if burst:
            await resp.write(whole)
        else:
            for c in chunks:
                await resp.write(c)
            await resp.write(tail)
        return resp

    return stream_app(completions, "zero")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--burst", action="store_true")
    args = ap.parse_args()
    web.run_app(make_app(args.tokens, args.burst), host="127.0.0.1", port=args.port,
                print=None, access_log=None)
