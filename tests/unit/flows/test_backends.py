"""Backends as a plan axis: the selection on the command line, the plan per backend, and the
index of what was measured where."""

from __future__ import annotations

import pytest

from gate.core.errors import GateError
from gate.flows import backends
from gate.judge.verdict import Outcome
from gate.plan.spec import load_plan, parse_plan


def test_a_selection_names_known_backends_once():
    assert backends.parse_selection(None) is None
    assert backends.parse_selection("xgrammar, guidance") == ["xgrammar", "guidance"]
    with pytest.raises(GateError, match="unknown: fast"):
        backends.parse_selection("xgrammar,fast")
    with pytest.raises(GateError, match="twice"):
        backends.parse_selection("guidance,guidance")
    with pytest.raises(GateError, match="name one or more"):
        backends.parse_selection(",")


def test_the_selection_replaces_the_plans_list_and_none_keeps_one_server():
    smoke = load_plan("cpu-smoke")
    assert backends.selected(smoke, None) == []  # the one-backend layout, OUT/ itself
    assert backends.selected(smoke, ["guidance"]) == ["guidance"]
    listed = parse_plan({**smoke.model_dump(mode="json", exclude_none=True),
                         "backends": ["xgrammar", "outlines"]})
    assert backends.selected(listed, None) == ["xgrammar", "outlines"]
    assert backends.selected(listed, ["guidance"]) == ["guidance"]


def test_each_backend_plan_launches_its_backend_and_hashes_apart():
    smoke = load_plan("cpu-smoke")
    guidance = smoke.for_backend("guidance")
    assert guidance.server.structured_outputs_backend == "guidance" and guidance.backend == "guidance"
    assert guidance.name == "cpu-smoke+guidance" and smoke.for_backend("xgrammar").name == "cpu-smoke"
    assert guidance.measurement_hash() != smoke.for_backend("xgrammar").measurement_hash()
    assert smoke.for_backend("xgrammar").measurement_hash() == smoke.measurement_hash()
    with pytest.raises(GateError, match="backends"):
        parse_plan({**smoke.model_dump(mode="json", exclude_none=True),
                    "backends": ["guidance", "guidance"]})
    with pytest.raises(GateError, match="backends"):
        parse_plan({**smoke.model_dump(mode="json", exclude_none=True), "backends": ["fast"]})


def test_the_index_keeps_every_backend_and_the_worst_outcome(tmp_path):
    entries = [backends.BackendEntry(backend="xgrammar", dir="xgrammar", outcome=Outcome.PASS),
               backends.BackendEntry(backend="guidance", dir="guidance", outcome=Outcome.FAIL,
                                     headline="FAIL: time to first token: ...")]
    backends.write_index(tmp_path, "ab", entries)
    index = backends.load_index(tmp_path)
    assert index.outcome == Outcome.FAIL and [e.backend for e in index.backends] == [
        "xgrammar", "guidance"]
    with pytest.raises(GateError, match="gate run"):
        backends.write_index(tmp_path, "run", entries)
        backends.backend_runs(tmp_path)


def test_commands_refuse_a_bad_selection_before_measuring(capsys):
    from gate.cli.main import main

    assert main(["run", "--backends", "fast", "--out", "/nonexistent/x"]) == 2
    assert "--backends 'fast'" in capsys.readouterr().err
    assert main(["run", "--backends", "guidance", "--base-url", "http://127.0.0.1:9"]) == 2
    assert "cannot be measured with several backends" in capsys.readouterr().err
    assert main(["ab", "--backends", "xgrammar,xgrammar"]) == 2
    assert "names a backend twice" in capsys.readouterr().err


def test_outlines_runs_without_the_whitespace_option_vllm_refuses_for_it():
    smoke = load_plan("cpu-smoke")
    assert smoke.for_backend("guidance").server.structured_outputs_config == {
        "disable_any_whitespace": True}
    assert smoke.for_backend("outlines").server.structured_outputs_config is None
