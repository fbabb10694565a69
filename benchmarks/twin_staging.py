"""What the PR twin's culprit (tests/e2e/test_pr_twin.py, STAGING) costs per engine step on
this machine, outside any server: the drain's guided step there is of the same order, so the
culprit about halves guided throughput or more. Prints milliseconds per step at one and at
all of torch's threads (NumPy does the work on one thread either way).

    python benchmarks/twin_staging.py [--slots 32] [--rows 8] [--vocab 262144]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch


def stage(sorted_bitmask: np.ndarray, logits: torch.Tensor, *, slots: int) -> None:
    """The twin's staging, as laid into apply_grammar_bitmask."""
    vocab = logits.shape[-1]
    for row in range(slots):
        allowed = np.unpackbits(sorted_bitmask.view(np.uint8), axis=1, bitorder="little")
        last = min(row, logits.shape[0] - 1)
        offsets = np.where(allowed[last, :vocab].astype(np.bool_), 0.0, -np.inf)
        staged = torch.full((vocab,), float("-inf"), dtype=torch.float64)
        staged.copy_(torch.from_numpy(offsets))
        if row < logits.shape[0]:
            logits[row] += staged.to(logits.device, dtype=logits.dtype)


def per_step_ms(*, slots: int, rows: int, vocab: int, repeats: int) -> list[float]:
    rng = np.random.default_rng(0)
    bitmask = rng.integers(-(2**31), 2**31 - 1, size=(rows, vocab // 32), dtype=np.int32)
    logits = torch.zeros(rows, vocab)
    stage(bitmask, logits, slots=slots)  # first call: allocator and import costs
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        stage(bitmask, logits, slots=slots)
        times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=32, help="the plan's max_num_seqs")
    parser.add_argument("--rows", type=int, default=8, help="guided sequences in the batch")
    parser.add_argument("--vocab", type=int, default=262144)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    for threads in sorted({1, torch.get_num_threads()}):
        torch.set_num_threads(threads)
        times = per_step_ms(slots=args.slots, rows=args.rows, vocab=args.vocab,
                            repeats=args.repeats)
        print(f"torch threads {threads}: {statistics.median(times):.1f} ms a step "
              f"(min {min(times):.1f}, max {max(times):.1f}, {args.repeats} steps, "
              f"{args.slots} slots, {args.rows} rows, vocab {args.vocab})")


if __name__ == "__main__":
    main()
