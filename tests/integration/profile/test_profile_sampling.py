"""gate.profile.sampling and gate.profile.data without vLLM: the policy, process discovery on real
process trees, py-spy failures, speedscope parsing, token counting, profile.json checks."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from support.profiles import make_profile, steady

from gate.core.errors import GateError, MeasurementError
from gate.judge.verdict import Outcome
from gate.measure.client import Response
from gate.profile.data import (
    FrameTable,
    ProcessInfo,
    load_build_profile,
    relative_file,
    save_build_profile,
    speedscope_stacks,
    tokens_between,
)
from gate.profile.sampling import (
    PySpyRun,
    SamplingOptions,
    find_py_spy,
    pid_listening_on,
    server_processes,
    should_profile,
)
from gate.profile.traffic import token_events


@pytest.mark.parametrize(("policy", "outcomes", "expected"), [
    ("always", [Outcome.PASS], True),
    ("never", [Outcome.FAIL], False),
    ("auto", [Outcome.PASS, Outcome.PASS], False),
    ("auto", [Outcome.PASS, Outcome.FAIL], True),
    ("auto", ["pass", "inconclusive"], True),
    ("auto", [Outcome.ERROR], False),
    ("auto", [], False),
])
def test_profile_policy_auto_profiles_a_fail_or_inconclusive_never_an_error(policy, outcomes, expected):
    assert should_profile(policy, outcomes) is expected


def test_profile_policy_rejects_unknown_names():
    with pytest.raises(GateError, match="--profile must be one of always, never, auto"):
        should_profile("sometimes", [])


@pytest.mark.parametrize(("change", "message"), [
    ({"windows": 1}, "at least 2 windows"),
    ({"rate_hz": 0}, "1-1000 Hz"),
    ({"window_s": 0.1}, "window length"),
    ({"settle_s": -1}, "must not be negative"),
])
def test_sampling_options_are_checked(change, message):
    with pytest.raises(GateError, match=message):
        SamplingOptions(**change).check()


def titled(pid: int) -> list[str]:
    out = []
    for child in psutil.Process(pid).children():
        with contextlib.suppress(psutil.NoSuchProcess):
            out += [a for a in child.cmdline()[:1] if a.startswith("VLLM::")]
    return out


@pytest.fixture
def fake_server_tree():
    """A real process tree shaped like vLLM's: a root with two retitled children (bash's
    `exec -a` sets argv[0] as setproctitle does) and one untitled helper."""
    script = ("(exec -a VLLM::EngineCore sleep 60) & (exec -a VLLM::Worker_TP0 sleep 60) & "
              "sleep 60 & wait")
    root = subprocess.Popen(["bash", "-c", script], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(titled(root.pid)) < 2:  # exec done?
            time.sleep(0.05)
        yield root.pid
    finally:
        os.killpg(root.pid, 9)
        root.wait()


def test_server_processes_finds_the_vllm_titled_children(fake_server_tree):
    found = server_processes(fake_server_tree)
    assert [p.role for p in found] == ["APIServer", "EngineCore", "Worker_TP0"]
    assert found[0].pid == fake_server_tree
    assert found[1].title == "VLLM::EngineCore"
    assert len({p.pid for p in found}) == 3


def test_server_processes_of_a_missing_pid():
    proc = subprocess.Popen(["true"])
    proc.wait()
    with pytest.raises(GateError, match=f"no process with pid {proc.pid}"):
        server_processes(proc.pid)


def test_pid_listening_on_finds_the_listener():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert pid_listening_on(f"http://127.0.0.1:{port}") == os.getpid()
    with pytest.raises(GateError, match=f"no local process listens on port {port}"):
        pid_listening_on(f"http://127.0.0.1:{port}")


def test_py_spy_failure_is_a_measurement_error(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    run = PySpyRun(find_py_spy(), ProcessInfo(pid=gone.pid, role="Worker"),
                   tmp_path / "w.json", 100)
    with pytest.raises(MeasurementError, match=rf"py-spy could not sample Worker \(pid {gone.pid}\)"):
        run.wait_started()


def test_py_spy_records_a_real_process(tmp_path):
    prog = "import time\nend = time.time() + 20\nwhile time.time() < end:\n    sum(range(1000))\n"
    target = subprocess.Popen([sys.executable, "-c", prog])
    try:
        run = PySpyRun(find_py_spy(), ProcessInfo(pid=target.pid, role="Worker"),
                       tmp_path / "w.json", 100)
        run.wait_started()
        time.sleep(1.0)
        run.stop()
    finally:
        target.kill()
        target.wait()
    assert run.popen.returncode == 0 and run.started_at is not None
    data = json.loads((tmp_path / "w.json").read_text())
    table = FrameTable()
    stacks = speedscope_stacks(data, table, [], process=0)
    assert sum(s.count for s in stacks) > 10
    assert any(f.name == "<module>" and f.file == "<string>" for f in table.frames)


@pytest.mark.parametrize(("path", "roots", "expected"), [
    ("/venv/lib/python3.11/site-packages/vllm/v1/structured_output/utils.py", [],
     "vllm/v1/structured_output/utils.py"),
    ("/usr/lib/python3/dist-packages/numpy/core.py", [], "numpy/core.py"),
    ("/src/checkout/vllm/v1/core/sched/scheduler.py", ["/src/checkout"],
     "vllm/v1/core/sched/scheduler.py"),
    ("/src/checkout/pkg/a.py", ["/src", "/src/checkout/"], "pkg/a.py"),
    ("/root/.pyenv/versions/3.11.7/lib/python3.11/json/encoder.py", [], "json/encoder.py"),
    ("/elsewhere/tool.py", ["/src"], "/elsewhere/tool.py"),
    ("<string>", [], "<string>"),
])
def test_frame_files_are_shown_relative_to_the_longest_source_root(path, roots, expected):
    assert relative_file(path, roots) == expected


def test_speedscope_stacks_are_counted_and_interned():
    doc = {"shared": {"frames": [
        {"name": "leaf", "file": "/venv/lib/python3.11/site-packages/pkg/m.py", "line": 3},
        {"name": "main", "file": "/repo/app.py", "line": 1}]},
        "profiles": [{"samples": [[1, 0], [1, 0], [1]], "weights": [0.01] * 3},
                     {"samples": [[1, 0]], "weights": [0.01]}]}
    table = FrameTable()
    stacks = speedscope_stacks(doc, table, ["/repo"], process=2)
    names = {(f.file, f.name) for f in table.frames}
    assert names == {("pkg/m.py", "leaf"), ("app.py", "main")}
    by_len = {len(s.frames): s.count for s in stacks}
    assert by_len == {2: 3, 1: 1} and all(s.process == 2 for s in stacks)
    main = table.frames[stacks[0].frames[0]]
    assert main.name == "main"  # root first


def test_token_events_spread_usage_over_chunks_and_skip_failures():
    ok = Response(index=0, send=0.0, chunk_times=[1.0, 2.0, 3.0, 4.0], output_tokens=6)
    failed = Response(index=1, send=0.0, chunk_times=[1.5], output_tokens=1, error="HTTP 500")
    events = token_events([ok, failed])
    assert events == [(1.0, 1.5), (2.0, 1.5), (3.0, 1.5), (4.0, 1.5)]
    assert tokens_between(events, 2.0, 4.0) == 3.0  # start inclusive, end exclusive


def test_profile_file_round_trip_and_bad_files(tmp_path):
    profile = make_profile("base", steady(slow=10))
    save_build_profile(profile, tmp_path / "p")
    assert load_build_profile(tmp_path / "p") == profile
    with pytest.raises(GateError, match="does not exist"):
        load_build_profile(tmp_path / "missing")
    broken = profile.model_copy(deep=True)
    broken.windows[2].output_tokens = 0
    save_build_profile(broken, tmp_path / "b")
    with pytest.raises(GateError, match=r"windows \[2\] produced no output tokens"):
        load_build_profile(tmp_path / "b")
    broken = profile.model_copy(deep=True)
    broken.windows[0].stacks[0].frames.append(99)
    save_build_profile(broken, tmp_path / "c")
    with pytest.raises(GateError, match="refers to a frame or process"):
        load_build_profile(tmp_path / "c" / "profile.json")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "profile.json").write_text('{"label": "x"}')
    with pytest.raises(GateError, match="invalid profile file"):
        load_build_profile(Path(tmp_path / "d"))
