"""A profiling load that ends before the sampling windows: the error says so, not the failure of
the py-spys that stopping the sampler killed (that read "py-spy could not sample APIServer, exit
-9", which sent a reader after ptrace rights). The load and the sampler are doubles: the rule
is sample_under_load's own."""

from __future__ import annotations

import os
import threading

import pytest

from gate.core.errors import MeasurementError
from gate.plan.spec import load_plan
from gate.profile import traffic
from gate.profile.sampling import SamplingOptions

KILLED = "py-spy could not sample APIServer (pid 1), exit -9: no output"


class RanOut(traffic.ServerLoad):
    """A server that answered every request before the first window was over."""

    def run(self, reqs, abort):
        return [], 0.0, 1.0


class KilledWhenStopped:
    """The sampler as it is when the load ends early: its windows not done; stopping it kills
    its py-spys, whose window then fails."""

    def __init__(self, processes, opts, raw_dir, *, log):
        self.done, self.error = threading.Event(), None

    def start(self) -> None:
        pass

    def abort_reason(self) -> str | None:
        return None

    def stop(self) -> None:
        self.error = MeasurementError(KILLED)
        self.done.set()

    def result(self):
        raise self.error


def test_a_load_that_ran_out_is_the_error_not_the_killed_sampler(monkeypatch, tmp_path):
    monkeypatch.setattr(traffic, "Sampler", KilledWhenStopped)
    load = RanOut("http://127.0.0.1:9", load_plan("cpu-smoke"), "m", 2, req_per_s=1.0)
    with pytest.raises(MeasurementError) as info:
        traffic.sample_under_load(load, [], opts=SamplingOptions(), raw_dir=tmp_path,
                                  root=os.getpid(), log=lambda _: None)
    assert "the guided load ended (all" in str(info.value)
    assert "before the sampling windows did" in str(info.value)
    assert "exit -9" not in str(info.value)


def test_the_load_holds_six_times_the_windows_at_the_warm_ups_pace(monkeypatch, tmp_path):
    """A warm-up measured while the machine was busy is slower than the windows' load: the
    list of requests outlasts the windows six times over at the warm-up's pace."""
    counts = []

    def requests(plan, model, first, count):
        counts.append(count)
        return []

    monkeypatch.setattr(traffic, "Sampler", KilledWhenStopped)
    monkeypatch.setattr(traffic, "guided_requests", requests)
    opts = SamplingOptions()
    load = RanOut("http://127.0.0.1:9", load_plan("cpu-smoke"), "m", 2, req_per_s=4.0)
    with pytest.raises(MeasurementError):
        traffic.sample_under_load(load, [], opts=opts, raw_dir=tmp_path, root=os.getpid(),
                                  log=lambda _: None)
    span = opts.settle_s + opts.windows * (opts.window_s + 1.0)
    assert counts == [int(-(-6 * 4.0 * span // 1)) + 2 * 2]
