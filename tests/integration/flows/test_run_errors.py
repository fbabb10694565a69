"""`gate run` refusing bad input before any measurement, as a real subprocess: no server to
reach, a model folder that is not a model, a port in use. None of them gets as far as starting
`vllm serve`."""

from __future__ import annotations

import socket

from support.cli import gate_subprocess
from support.vllm_helpers import server_processes, small_plan

from gate.core.errors import EXIT_BAD_INPUT


def test_unreachable_server_is_a_clear_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = gate_subprocess("run", "--base-url", f"http://127.0.0.1:{port}", "--out", str(tmp_path))
    assert proc.returncode == EXIT_BAD_INPUT
    assert f"cannot reach a vLLM server at http://127.0.0.1:{port}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "results.json").exists()


def test_model_folder_that_is_not_a_model(tmp_path):
    folder = tmp_path / "notamodel"
    folder.mkdir()
    (folder / "README.md").write_text("hello")
    plan, marker = small_plan(tmp_path, **{"server.model": str(folder)})
    proc = gate_subprocess("run", "--plan", str(plan), "--out", str(tmp_path / "out"))
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    assert f"{folder} is not a model folder: it has no config.json" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert server_processes(marker) == []
    assert not (tmp_path / "out" / "results.json").exists()


def test_port_in_use_is_a_clear_error(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        plan, marker = small_plan(tmp_path, **{"server.port": port})
        proc = gate_subprocess("run", "--plan", str(plan), "--out", str(tmp_path / "out"))
    assert proc.returncode == EXIT_BAD_INPUT
    assert f"port {port} on 127.0.0.1 is already in use" in proc.stderr
    assert server_processes(marker) == []
