"""Without the profile extra (py-spy), whatever needs it says so at once: `gate profile record`
and `gate bisect --profile always` exit 2 with how to install it, before any server is asked
for anything; an A/B's `--profile auto` goes on and its verdict's note says why there is no
profile diff."""

from __future__ import annotations

import io
import sys
from types import SimpleNamespace

import pytest
from support import factories as f
from support.cli import gate_in_process

from gate.core.errors import EXIT_BAD_INPUT, GateError
from gate.core.progress import Progress
from gate.flows import ab
from gate.judge.verdict import Outcome
from gate.profile.sampling import PY_SPY_MISSING, find_py_spy, require_py_spy

PYTHON = sys.executable  # the real interpreter, before a test hides its folder
UNREACHABLE = "http://127.0.0.1:9"  # asked for anything, it would be "cannot reach"


@pytest.fixture
def no_py_spy(monkeypatch, tmp_path):
    """An install without the extra: no py-spy next to the interpreter, none on PATH (py-spy
    is a binary: there is no module to import)."""
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    monkeypatch.setattr(sys, "executable", str(bare / "python"))
    monkeypatch.setenv("PATH", str(bare))


def test_the_lookup_names_the_extra(no_py_spy):
    with pytest.raises(GateError) as info:
        find_py_spy()
    assert str(info.value) == "py-spy is not installed: pip install 'gate[profile]'"
    assert str(info.value) == PY_SPY_MISSING


def test_only_profile_always_requires_py_spy_at_the_start(no_py_spy):
    with pytest.raises(GateError, match=r"pip install 'gate\[profile\]'"):
        require_py_spy("always")
    require_py_spy("auto")
    require_py_spy("never")


def test_profile_record_without_py_spy_exits_2_before_asking_the_server(no_py_spy, tmp_path):
    proc = gate_in_process("profile", "record", "--base-url", UNREACHABLE,
                           "--out", tmp_path / "rec")
    assert proc.returncode == EXIT_BAD_INPUT
    assert proc.stderr == f"gate: error: {PY_SPY_MISSING}\n"
    assert not (tmp_path / "rec").exists()


def test_bisect_profile_always_without_py_spy_is_refused_before_anything_starts(
        no_py_spy, tmp_path):
    out = tmp_path / "bisect"
    proc = gate_in_process("bisect", "--repo", tmp_path, "--good", "a" * 40, "--bad", "b" * 40,
                           "--python", PYTHON, "--out", out, "--profile", "always")
    assert proc.returncode == EXIT_BAD_INPUT
    assert proc.stderr == f"gate: error: {PY_SPY_MISSING}\n"
    assert not out.exists()


def test_ab_profile_auto_without_py_spy_notes_why_in_the_verdict(no_py_spy, tmp_path):
    """gate.flows.ab.Profiler on a failed A/B: profiling fails at once, into one note (the
    servers' URL is unreachable: asking it would be another error)."""
    log = io.StringIO()
    profiler = ab.Profiler(plan=f.cpu_plan(), out=tmp_path, profiling=ab.Profiling("auto"),
                           progress=Progress(stream=log))
    servers = {label: SimpleNamespace(base_url=UNREACHABLE, server_pid=1)
               for label in ("base", "head")}
    assert profiler.wanted(f.verdict(Outcome.FAIL))
    profiler.run(servers, roots={})  # type: ignore[arg-type]
    assert profiler.notes == [f"no profile diff: {PY_SPY_MISSING}"]
    assert profiler.diff is None
    assert f"profiling failed: {PY_SPY_MISSING}" in log.getvalue()
    assert not (tmp_path / "base" / "profile").exists()
