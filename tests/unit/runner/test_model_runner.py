"""Which model runner served, read from vLLM's log: the recorded CPU run and the GPU logs of
both runners (tests/fixtures/server_logs, README there says which are recorded)."""

from __future__ import annotations

import pytest
from support.paths import FIXTURES

from gate.runner.model_runner import runner_in_line, served_runner

LOGS = FIXTURES / "server_logs"


def runners_named(log: str) -> list[tuple[str, str]]:
    lines = (LOGS / log).read_text().splitlines()
    return [(runner, line) for line in lines if (runner := runner_in_line(line))]


@pytest.mark.parametrize(("log", "want"), [("cpu_v1.log", "v1"), ("gpu_v2.log", "v2"),
                                           ("gpu_v1_pinned.log", "v1"),
                                           ("gpu_v1_fallback.log", "v1")])
def test_each_log_names_the_runner_that_served(log, want):
    served = served_runner(runners_named(log))
    assert served.runner == want and served.conflicting == ()
    assert served.line and runner_in_line(served.line) == want


def test_a_log_that_names_both_runners_is_a_conflict_not_a_guess():
    served = served_runner([("v2", "Using V2 Model Runner"),
                            ("v1", "[gpu_model_runner.py:1] Starting to load model x")])
    assert served.runner is None and served.conflicting == ("v1", "v2")


def test_a_log_without_a_runner_line_names_none():
    assert runner_in_line("INFO [api_server.py:1] vLLM API server version 0.33.0") is None
    assert served_runner([]).runner is None
