"""The per-step staging of the grammar bitmask on this machine's GPU, the ways vLLM has done it
(docs/background.md#mechanisms):

- fresh_pinned: a new `torch.full(..., -1, pin_memory=True)` host tensor every step, filled
  through its `.numpy()` view and sent with `.to(device, non_blocking=True)` (V1's
  `apply_grammar_bitmask` since PR 45424, the seed's culprit);
- reused_pinned: one pinned buffer allocated once and refilled every step (the fix);
- np_full: `np.full(...)` every step and `torch.from_numpy(...).to(device)` from pageable
  memory (before PR 45424);
- vllm_async_tensor_h2d: a fresh numpy bitmask through this vLLM's own
  `vllm.utils.torch_utils.async_tensor_h2d` (V2's path), when vLLM imports.

Each step writes the step's bitmask rows into the staging buffer, copies it to the device and
waits for the copy (a step ends in a sync in vLLM too). Printed per method and rows: the mean,
p50 and p99 microseconds per step, at torch's default threads and at one thread.

    python benchmarks/bitmask_staging.py [--rows 64,384] [--steps 2000] [--json OUT]
    python benchmarks/bitmask_staging.py --device cpu   # the code path without a GPU (no pinning)
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np
import torch

WORDS = 8192  # ceil(262,144 / 32): a Gemma-sized vocabulary's bitmask row


def methods(rows: int, device: str) -> dict[str, Callable[[np.ndarray], torch.Tensor]]:
    pin = device != "cpu"
    reused = torch.empty((rows, WORDS), dtype=torch.int32, pin_memory=pin)

    def fresh_pinned(src: np.ndarray) -> torch.Tensor:
        host = torch.full((rows, WORDS), -1, dtype=torch.int32, pin_memory=pin)
        host.numpy()[:] = src
        return host.to(device, non_blocking=True)

    def reused_pinned(src: np.ndarray) -> torch.Tensor:
        view = reused.numpy()
        view.fill(-1)
        view[:] = src
        return reused.to(device, non_blocking=True)

    def np_full(src: np.ndarray) -> torch.Tensor:
        host = np.full((rows, WORDS), -1, dtype=np.int32)
        host[:] = src
        return torch.from_numpy(host).to(device, non_blocking=True)

    found = {"fresh_pinned": fresh_pinned, "reused_pinned": reused_pinned, "np_full": np_full}
    try:
        from vllm.utils.torch_utils import async_tensor_h2d
    except Exception:  # noqa: BLE001 - any vLLM that does not import: measure the rest
        return found

    def vllm_async_tensor_h2d(src: np.ndarray) -> torch.Tensor:
        return async_tensor_h2d(np.array(src), device=device)

    found["vllm_async_tensor_h2d"] = vllm_async_tensor_h2d
    return found


def time_method(stage: Callable[[np.ndarray], torch.Tensor], src: np.ndarray, steps: int,
                sync: Callable[[], None]) -> dict[str, float]:
    for _ in range(min(50, steps)):  # warm the allocators
        stage(src)
    sync()
    times = np.empty(steps)
    for i in range(steps):
        start = time.perf_counter()
        stage(src)
        sync()
        times[i] = time.perf_counter() - start
    us = times * 1e6
    return {"mean_us": float(us.mean()), "p50_us": float(np.percentile(us, 50)),
            "p99_us": float(np.percentile(us, 99))}


def measure(rows_list: list[int], steps: int, device: str) -> list[dict]:
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    rng = np.random.default_rng(0)
    out = []
    default_threads = torch.get_num_threads()
    for threads in dict.fromkeys([default_threads, 1]):
        torch.set_num_threads(threads)
        for rows in rows_list:
            src = rng.integers(-2**31, 2**31 - 1, size=(rows, WORDS), dtype=np.int32)
            for name, stage in methods(rows, device).items():
                figures = time_method(stage, src, steps, sync)
                out.append({"method": name, "rows": rows, "torch_threads": threads, **figures})
    torch.set_num_threads(default_threads)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="64,384", help="bitmask rows per step, comma-separated")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    if args.device != "cpu" and not torch.cuda.is_available():
        print("bitmask_staging: no CUDA device (torch.cuda.is_available() is False)")
        return 2
    rows = [int(r) for r in args.rows.split(",") if r]
    figures = measure(rows, args.steps, args.device)
    where = torch.cuda.get_device_name() if args.device != "cpu" else "cpu"
    print(f"device {where}, torch {torch.__version__}, {args.steps} steps, {WORDS} words a row")
    for f in figures:
        print(f"{f['method']:>22} rows {f['rows']:>4} threads {f['torch_threads']:>3}: mean "
              f"{f['mean_us']:9.1f} us  p50 {f['p50_us']:9.1f}  p99 {f['p99_us']:9.1f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": where, "steps": args.steps, "figures": figures}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
