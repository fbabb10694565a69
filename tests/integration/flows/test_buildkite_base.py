"""The base of a Buildkite A/B (gate.flows.buildkite): the merge base's Python files over the
PR's installed build, from a real git repository; refused when the PR changed what an
overlay cannot undo."""

from __future__ import annotations

import sys

import pytest
from support.gitrepo import commit, init

from gate.core.errors import GateError
from gate.flows.buildkite import base_over_head


@pytest.fixture
def repo(tmp_path):
    path = init(tmp_path / "vllm")
    base = commit(path, "base", {"vllm/guided.py": "SPEED = 'fast'\n", "setup.py": "x = 1\n"})
    return path, base


def test_the_base_is_its_python_over_the_heads_build(repo, tmp_path):
    path, base = repo
    head = commit(path, "the PR", {"vllm/guided.py": "SPEED = 'slow'\n",
                                   "vllm/added.py": "NEW = 1\n"})
    build = base_over_head(path, head=head, base=base, python=sys.executable,
                           dest=tmp_path / "overlay")
    assert build.commit == base and build.python == sys.executable
    assert (tmp_path / "overlay/vllm/guided.py").read_text() == "SPEED = 'fast'\n"
    assert not (tmp_path / "overlay/vllm/added.py").exists()  # the PR's new file is left out
    assert build.env["PYTHONPATH"].split(":")[0] == str((tmp_path / "overlay").resolve())
    assert build.env["PYTHONSAFEPATH"] == "1"
    assert sorted(build.overlay_files) == ["vllm/added.py", "vllm/guided.py"]


def test_a_pr_that_changes_compiled_sources_needs_a_build_of_its_base(repo, tmp_path):
    path, base = repo
    head = commit(path, "a kernel", {"csrc/bitmask.cu": "__global__ void k() {}\n"})
    with pytest.raises(GateError, match="the base needs its own build"):
        base_over_head(path, head=head, base=base, python=sys.executable,
                       dest=tmp_path / "overlay")
