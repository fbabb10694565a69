"""A plan whose server is the stand-in `vllm serve` (tests/support/fake_vllm.py, launched as
vLLM is through tests/fixtures/fake_vllm): cpu-smoke's checks on a server that starts in a
second and streams like vLLM, with one sweep level of half-second cells, no drain, 2 rounds:
for the tests of what the gate does around a server rather than of vLLM itself."""

from __future__ import annotations

from pathlib import Path

from support.vllm_helpers import stand_in_plan


def fake_plan(tmp_path: Path, servers: str = "persistent", max_rounds: int = 2) -> Path:
    plan, _ = stand_in_plan(tmp_path, **{
        "warmup": {"requests": 2, "concurrency": 2}, "drain.enabled": False,
        "sweep.levels": [2], "sweep.window_s": 0.5, "sweep.max_window_s": 5,
        "sweep.min_requests_factor": 2, "ab.servers": servers, "ab.max_rounds": max_rounds})
    return plan
