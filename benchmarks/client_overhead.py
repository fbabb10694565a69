"""The gate's load client beside `vllm bench serve`'s, against one zero-work streaming server.

Both clients talk to benchmarks/zero_work_server.py on 127.0.0.1 at concurrency 64 with 256
output tokens per response; the server runs on one core and the clients on the other (when
there are two), so output tokens ingested per second measure the client. Client-added
latency is the TTFT and E2EL a client reports against a server that does no work. The runs
alternate gate / vLLM, in two server modes: one write per token, and one burst per response.

    python benchmarks/client_overhead.py [--requests 1280] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
from tabulate import tabulate

from gate.core.settings import Settings
from gate.measure.client import Request, run_closed_loop
from gate.plan.spec import load_plan
from gate.runner.tiny_model import ensure

HERE = Path(__file__).resolve().parent
CONCURRENCY = 64
TOKENS = 256


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pin(core: int | None) -> list[str]:
    return ["taskset", "-c", str(core)] if core is not None and shutil.which("taskset") else []


def start_server(burst: bool, core: int | None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [*pin(core), sys.executable, str(HERE / "zero_work_server.py"), "--port", str(port),
           "--tokens", str(TOKENS)] + (["--burst"] if burst else [])
    proc = subprocess.Popen(cmd)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            requests.get(url + "/health", timeout=1)
            return proc, url
        except requests.RequestException:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("zero-work server did not start")


def gate_client(url: str, n: int) -> dict:
    reqs = [Request(index=i, body={"model": "zero", "messages": [], "stream": True}, schema=None)
            for i in range(n)]
    responses, start, end = asyncio.run(run_closed_loop(url, reqs, concurrency=CONCURRENCY,
                                                        timeout_s=600))
    ok = [r for r in responses if r.error is None]
    tokens = sum(r.output_tokens or 0 for r in ok)
    return {"ok": len(ok), "tok_s": tokens / (end - start),
            "ttft_ms": statistics.median(r.ttft for r in ok) * 1000,
            "e2el_ms": statistics.median(r.end - r.send for r in ok) * 1000}


def vllm_client(url: str, n: int, tokenizer: str, core: int | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [*pin(core), sys.executable, str(HERE / "vllm_bench.py"), "--backend", "openai-chat",
               "--base-url", url, "--endpoint", "/v1/chat/completions", "--model", "zero",
               "--tokenizer", tokenizer, "--dataset-name", "random", "--random-input-len", "16",
               "--random-output-len", str(TOKENS), "--num-prompts", str(n),
               "--max-concurrency", str(CONCURRENCY), "--num-warmups", "0", "--disable-tqdm",
               "--percentile-metrics", "ttft,tpot,itl,e2el",
               "--save-result", "--result-dir", tmp, "--result-filename", "r.json"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"vllm bench serve failed:\n{proc.stderr[-3000:]}")
        data = json.loads((Path(tmp) / "r.json").read_text())
    return {"ok": data["completed"], "tok_s": data["output_throughput"],
            "ttft_ms": data["median_ttft_ms"], "e2el_ms": data["median_e2el_ms"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1280)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    two_cores = (os.cpu_count() or 1) >= 2
    server_core, client_core = (1, 0) if two_cores else (None, None)
    if client_core is not None:
        os.sched_setaffinity(0, {client_core})
    tokenizer = str(ensure(load_plan("cpu-smoke").server.tiny_model, Settings.from_env().cache_dir))
    rows = []
    for burst in (False, True):
        proc, url = start_server(burst, server_core)
        try:
            gate_client(url, CONCURRENCY * 2)  # warm the server's and client's code paths
            for r in range(args.rounds):
                for name in ("gate", "vllm bench serve"):
                    res = (gate_client(url, args.requests) if name == "gate"
                           else vllm_client(url, args.requests, tokenizer, client_core))
                    rows.append(["burst" if burst else "per token", r + 1, name, res["ok"],
                                 f"{res['tok_s']:,.0f}", f"{res['ttft_ms']:.1f}",
                                 f"{res['e2el_ms']:.1f}"])
                    print(" | ".join(map(str, rows[-1])), flush=True)
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"\nconcurrency {CONCURRENCY}, {TOKENS} output tokens per response, {args.requests} "
          f"requests per run; server on core {server_core}, client on core {client_core}")
    print(tabulate(rows, headers=["server writes", "round", "client", "ok", "output tok/s",
                                  "TTFT p50 ms", "E2EL p50 ms"], disable_numparse=True))


if __name__ == "__main__":
    main()
