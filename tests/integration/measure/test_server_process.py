"""Where `vllm serve` is launched: its own process group, the gate's own session.

A real child process stands in for the server (these tests need no vLLM)."""

import os
import sys

import pytest

from gate.measure.server import VllmServer
from gate.plan.spec import ServerSpec

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def _server(tmp_path) -> VllmServer:
    spec = ServerSpec(model="model-dir", launch="command", command=SLEEPER,
                      shutdown_timeout_s=5)
    return VllmServer(spec, "model-dir", tmp_path / "server.log", log=lambda _: None)


def test_server_has_its_own_process_group_in_the_gates_session(tmp_path):
    # Same session = same scheduler autogroup as the client: a new session let the server's
    # busy threads starve the client on a 2-core runner (collapsed streams).
    server = _server(tmp_path)
    server.start()
    try:
        pid = server.proc.pid
        assert os.getpgid(pid) == pid
        assert os.getpgid(pid) != os.getpgid(0)
        assert os.getsid(pid) == os.getsid(0)
    finally:
        server.stop()


def test_stop_ends_the_whole_group(tmp_path):
    server = _server(tmp_path)
    server.start()
    pid = server.proc.pid
    server.stop()
    assert server.proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # signal 0: only asks whether the group still has members
