"""A plan whose server is the stand-in `vllm serve` (tests/support/fake_vllm.py, launched as
vLLM is through tests/fixtures/fake_vllm): cpu-smoke's checks on a server that starts in a
second and streams like vLLM, with one sweep level of half-second cells, no drain, 2 rounds:
for the tests of what the gate does around a server rather than of vLLM itself."""

from __future__ import annotations

import sys
from pathlib import Path

from support.paths import FAKE_VLLM
from support.vllm_helpers import stand_in_plan

# The stand-in package first on this interpreter's sys.path, then its `vllm serve`.
SERVE = (f"import sys; sys.path.insert(0, {str(FAKE_VLLM)!r}); "
         "from vllm.entrypoints.cli.main import main; sys.exit(main())")


def fake_plan(tmp_path: Path, servers: str = "persistent", max_rounds: int = 2, *,
              command: bool = False) -> Path:
    """`command`: the stand-in launched by this interpreter as the plan's `launch: command`
    (builds whose own interpreter has no aiohttp: stand-in wheels in fresh virtualenvs); the
    build's interpreter is then only probed, as a build behind a launch command is."""
    launch = {"server.launch": "command", "server.env": {},
              "server.command": [sys.executable, "-c", SERVE, "serve"]} if command else {}
    plan, _ = stand_in_plan(tmp_path, **{
        "warmup": {"requests": 2, "concurrency": 2}, "drain.enabled": False,
        "sweep.levels": [2], "sweep.window_s": 0.5, "sweep.max_window_s": 5,
        "sweep.min_requests_factor": 2, "ab.servers": servers, "ab.max_rounds": max_rounds,
        **launch})
    return plan
