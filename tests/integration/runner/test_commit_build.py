"""A commit that an overlay cannot carry is installed for real (gate.runner.commit_build): a
shared clone checked out at the commit, a virtualenv of its own, and vLLM's precompiled mode
with the commit's own wheel. pip and venv are a recording stand-in here (no download); the
git side is real."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.bisect_repo import UTILS, install_package, make_repo, utils_source
from support.gitrepo import git

from gate.flows.bisect_builds import StepBuilds
from gate.runner.commit_build import InstalledBuild, NotBuilt, install_commit

# python -m venv DEST: DEST/bin/python is this script again; -m pip: log the call and its
# precompiled settings; -c (find the package): print where it would be.
SHIM = """#!/usr/bin/env bash
if [ "$1" = -m ] && [ "$2" = venv ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0
fi
if [ "$1" = -m ] && [ "$2" = pip ]; then
  echo "pip ${*:3} use=${VLLM_USE_PRECOMPILED:-} wheel=${VLLM_PRECOMPILED_WHEEL_COMMIT:-}" >> "$SHIM_LOG"
  exit "${PIP_EXIT:-0}"
fi
echo "$SHIM_PACKAGE"
"""


@pytest.fixture
def shim(tmp_path, monkeypatch) -> tuple[str, Path]:
    script = tmp_path / "shim" / "python"
    script.parent.mkdir()
    script.write_text(SHIM)
    script.chmod(0o755)
    log = tmp_path / "pip.log"
    monkeypatch.setenv("SHIM_LOG", str(log))
    monkeypatch.setenv("SHIM_PACKAGE", str(install_package(tmp_path / "installed")))
    return str(script), log


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path, [("kernel", {"csrc/k.cu": "// k\n"}),
                                ("python", {UTILS: utils_source(slow_ms=4)})])


def test_a_precompiled_install_uses_the_commits_own_wheel(shim, repo, tmp_path):
    python, log = shim
    path, shas = repo
    built = install_commit(path, shas[1], mode="precompiled", dest=tmp_path / "b", python=python)
    assert git(tmp_path / "b" / "src", "rev-parse", "HEAD") == shas[1]
    assert built.commit == shas[1] and built.python == str(tmp_path / "b/venv/bin/python")
    (line,) = log.read_text().splitlines()
    assert line == (f"pip install -e {(tmp_path / 'b' / 'src').resolve()} use=1 "
                    f"wheel={shas[1]}")


def test_a_failed_install_is_not_built_never_a_measurement(shim, repo, tmp_path, monkeypatch):
    python, _ = shim
    path, shas = repo
    monkeypatch.setenv("PIP_EXIT", "1")
    with pytest.raises(NotBuilt, match=f"the precompiled install of {shas[1][:12]} failed"):
        install_commit(path, shas[1], mode="precompiled", dest=tmp_path / "b", python=python)


def test_later_commits_are_overlays_over_the_build_a_bisect_installed(shim, repo, tmp_path):
    python, log = shim
    path, shas = repo
    installed: list[InstalledBuild] = []
    base = InstalledBuild(commit=shas[0], python=python, package_dir=str(tmp_path / "x/vllm"))
    builds = StepBuilds(path, [base], "precompiled", on_install=installed.append)
    kernel = builds.build(shas[1], tmp_path / "s1")
    assert kernel.how.startswith("the build of") and "precompiled install" in kernel.how
    after = builds.build(shas[2], tmp_path / "s2")
    assert after.overlay_files == [UTILS] and after.python == installed[0].python
    assert len(log.read_text().splitlines()) == 1  # one install, then an overlay over it
