"""The same guided cell measured by the gate's client and by `vllm bench serve`.

One real `vllm serve` (the cpu-smoke plan's tiny 262k-vocab model) serves both; the runs
alternate gate / vLLM. vLLM's client gets the same JSON schema through `--extra-body`
(response_format json_schema), the same concurrency and request count. `vllm bench serve`
forces ignore_eos on its random dataset, so its output length is set to the gate's mean
guided output length (guided outputs end when the schema closes): both then decode the same
number of tokens per request, and output tok/s and TPOT p50 should agree within the noise.

    python benchmarks/cross_check.py [--concurrency 8] [--requests 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

from gate.core.settings import Settings
from gate.flows.run import Cell, Measurement, to_record
from gate.measure import client, metrics
from gate.measure.server import VllmServer
from gate.plan import workload
from gate.plan.spec import load_plan
from gate.runner.tiny_model import ensure

HERE = Path(__file__).resolve().parent


def gate_cell(plan, base_url: str, concurrency: int, n: int) -> dict:
    m = Measurement(plan=plan, model_name=plan.server.served_model_name,
                    prompts=workload.prompts(plan.workload))
    cell = Cell("sweep", "guided", concurrency, n)
    reqs = m.build_requests(cell)
    responses, start, end = asyncio.run(client.run_closed_loop(base_url, reqs,
                                                               concurrency=concurrency,
                                                               timeout_s=600))
    schemas = {r.index: r.schema for r in reqs}
    records = [to_record(r, cell, schemas[r.index], 0.0) for r in responses]
    s = metrics.summarize_cell(records, "sweep", "guided", concurrency, 0, end - start)
    return {"ok": s.completed, "valid": s.valid_outputs, "tok_s": s.output_throughput,
            "tpot_ms": s.tpot_ms.p50, "ttft_ms": s.ttft_ms.p50,
            "tokens": s.total_output_tokens / max(s.completed, 1)}


def vllm_cell(plan, base_url: str, model_dir: str, concurrency: int, n: int,
              output_len: int) -> dict:
    schema = workload.base_schema(plan.workload)
    extra = {"response_format": {"type": "json_schema",
                                 "json_schema": {"name": "gate_output", "schema": schema}},
             "temperature": plan.workload.temperature}
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, str(HERE / "vllm_bench.py"), "--backend", "openai-chat",
               "--base-url", base_url, "--endpoint", "/v1/chat/completions",
               "--model", plan.server.served_model_name, "--tokenizer", model_dir,
               "--dataset-name", "random", "--random-input-len", "24",
               "--random-output-len", str(output_len), "--num-prompts", str(n),
               "--max-concurrency", str(concurrency), "--num-warmups", "0", "--disable-tqdm",
               "--extra-body", json.dumps(extra), "--save-result", "--result-dir", tmp,
               "--percentile-metrics", "ttft,tpot,itl,e2el",
               "--result-filename", "r.json"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"vllm bench serve failed:\n{proc.stderr[-3000:]}")
        d = json.loads((Path(tmp) / "r.json").read_text())
    return {"ok": d["completed"], "valid": "-", "tok_s": d["output_throughput"],
            "tpot_ms": d["median_tpot_ms"], "ttft_ms": d["median_ttft_ms"],
            "tokens": d["total_output_tokens"] / max(d["completed"], 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    plan = load_plan("cpu-smoke")
    model_dir = str(ensure(plan.server.tiny_model, Settings.from_env().cache_dir))
    log = Path(tempfile.mkdtemp()) / "server.log"
    rows = []
    started = time.monotonic()
    with VllmServer(plan.server, model_dir, log) as server:
        warm = gate_cell(plan, server.base_url, args.concurrency, 16)  # also warms the cache
        output_len = round(warm["tokens"])
        for r in range(args.rounds):
            for name in ("gate", "vllm bench serve"):
                res = (gate_cell(plan, server.base_url, args.concurrency, args.requests)
                       if name == "gate" else
                       vllm_cell(plan, server.base_url, model_dir, args.concurrency, args.requests,
                                 output_len))
                rows.append([r + 1, name, res["ok"], res["valid"], f"{res['tokens']:.1f}",
                             f"{res['tok_s']:.0f}", f"{res['tpot_ms']:.2f}", f"{res['ttft_ms']:.1f}"])
                print(" | ".join(map(str, rows[-1])), flush=True)
    print(f"\nguided JSON, concurrency {args.concurrency}, {args.requests} requests per run, "
          f"vllm bench serve output length {output_len} (ignore_eos); "
          f"{time.monotonic() - started:.0f}s in all")
    print(tabulate(rows, headers=["round", "client", "ok", "valid", "out tokens/req",
                                  "output tok/s", "TPOT p50 ms", "TTFT p50 ms"],
                   disable_numparse=True))


if __name__ == "__main__":
    main()
