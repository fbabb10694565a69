"""Overlays over an installed build (gate.runner.overlay, gate.runner.commit_build): what a
real interpreter imports through them, what they share with the installed build and what
not, and when a commit needs a real install instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.bisect_repo import UTILS, install_package, make_repo, utils_source

from gate.core.errors import GateError
from gate.runner import overlay
from gate.runner.commit_build import InstalledBuild, overlay_for


def imported(env: dict[str, str], code: str, cwd: Path | None = None) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, cwd=cwd, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_the_overlay_imports_the_changed_module_and_links_everything_else(tmp_path):
    installed = install_package(tmp_path)
    folder = overlay.build_overlay(installed, tmp_path / "ov",
                                   {UTILS: utils_source(slow_ms=7).encode()})
    env = overlay.overlay_env(folder, {})
    out = imported(env, "import vllm.v1.structured_output.utils as u, vllm.v1.structured_output."
                        "backend as b; print(u.SLOW_MS, u.__file__, b.__file__)")
    slow, utils_file, backend_file = out.split()
    assert slow == "7" and utils_file.startswith(str(folder))
    # an unchanged module is the installed file, through a link
    assert Path(backend_file).resolve() == (installed / "v1/structured_output/backend.py")
    assert (folder / "vllm/_C.abi3.so").is_symlink()
    assert (folder / "vllm/_C.abi3.so").resolve() == installed / "_C.abi3.so"
    # the installed build itself is untouched
    assert "SLOW_MS = 0" in (installed / "v1/structured_output/utils.py").read_text()


def test_byte_code_is_never_shared_with_the_installed_build(tmp_path):
    installed = install_package(tmp_path)
    writes = {"PYTHONDONTWRITEBYTECODE": ""}  # empty: Python writes byte code
    imported({"PYTHONPATH": str(installed.parent), **writes},
             "import vllm.v1.structured_output.utils")
    assert (installed / "v1/structured_output/__pycache__").is_dir()
    folder = overlay.build_overlay(installed, tmp_path / "ov", {UTILS: b"SLOW_MS = 3\n"})
    linked = [p for p in folder.rglob("__pycache__") if p.is_symlink()]
    assert linked == []
    imported({**overlay.overlay_env(folder, {}), **writes},
             "import vllm.v1.structured_output.utils")
    cache = folder / "vllm/v1/structured_output/__pycache__"
    assert cache.is_dir() and not cache.is_symlink()


def test_a_removed_module_is_gone_and_a_new_folder_is_real(tmp_path):
    installed = install_package(tmp_path)
    folder = overlay.build_overlay(
        installed, tmp_path / "ov", {"vllm/v2/new.py": b"X = 1\n"},
        removed=["vllm/v1/structured_output/backend.py"])
    env = overlay.overlay_env(folder, {})
    assert imported(env, "import vllm.v2.new as n; print(n.X)") == "1"
    failures = overlay.import_failures(sys.executable, env, [
        "vllm.v1.structured_output.backend", "vllm.v1.structured_output.utils"])
    assert list(failures) == ["vllm.v1.structured_output.backend"]
    assert "ModuleNotFoundError" in failures["vllm.v1.structured_output.backend"]


def test_a_vllm_folder_in_the_working_directory_does_not_shadow_the_overlay(tmp_path):
    installed = install_package(tmp_path)
    checkout = tmp_path / "checkout"
    (checkout / "vllm").mkdir(parents=True)
    (checkout / "vllm/__init__.py").write_text("raise ImportError('the checkout')\n")
    folder = overlay.build_overlay(installed, tmp_path / "ov", {UTILS: b"SLOW_MS = 1\n"})
    code = "import runpy, sys; sys.argv=['x']; import vllm; print(vllm.__file__)"
    out = imported(overlay.overlay_env(folder, {}), code, cwd=checkout)
    assert out.startswith(str(folder))


def test_import_failures_names_the_module_and_its_error(tmp_path):
    installed = install_package(tmp_path)
    folder = overlay.build_overlay(installed, tmp_path / "ov", {UTILS: b"def broken(:\n"})
    failures = overlay.import_failures(sys.executable, overlay.overlay_env(folder, {}),
                                       ["vllm.v1.structured_output.utils", "vllm"])
    assert set(failures) == {"vllm.v1.structured_output.utils"}
    assert failures["vllm.v1.structured_output.utils"].startswith("SyntaxError")


def test_overlays_refuse_paths_outside_the_package(tmp_path):
    installed = install_package(tmp_path)
    for bad in ("setup.py", "vllm/../evil.py", "/etc/passwd", "vllm/_C.abi3.so"):
        with pytest.raises(GateError, match="an overlay can carry"):
            overlay.build_overlay(installed, tmp_path / "ov", {bad: b""})


def test_installed_package_is_found_without_importing_it(tmp_path):
    assert overlay.installed_package(sys.executable).name == "vllm"
    with pytest.raises(GateError, match="no installed nothing_here package"):
        overlay.installed_package(sys.executable, "nothing_here")


@pytest.mark.parametrize(("files", "overlayable"), [
    ({UTILS: utils_source(slow_ms=1)}, True),
    ({"tests/test_x.py": "x = 1\n", "docs/a.md": "a\n"}, True),  # not part of the build
    ({"vllm/configs/moe.json": "{}\n"}, True),  # package data
    ({"csrc/kernel.cu": "// k\n"}, False),
    ({"setup.py": "# s\n"}, False),
    ({"requirements/common.txt": "xgrammar==0.2\n"}, False),  # a pin: pip, not an overlay
    ({"pyproject.toml": "[tool.ruff]\n"}, True),  # no [build-system] change
    ({"vllm/ops/kernel.cpp": "// k\n"}, False),
])
def test_a_commit_is_an_overlay_unless_it_changes_what_is_compiled(tmp_path, files, overlayable):
    installed = install_package(tmp_path)
    repo, shas = make_repo(tmp_path, [("change", files)])
    base = InstalledBuild(commit=shas[0], python=sys.executable, package_dir=str(installed))
    plan = overlay_for(repo, shas[1], [base])
    assert (plan is not None) == overlayable
    if plan is not None:
        assert plan.files == sorted(p for p in files if p.startswith("vllm/"))


def test_the_overlay_goes_over_the_closest_installed_build(tmp_path):
    installed = install_package(tmp_path)
    repo, shas = make_repo(tmp_path, [("kernel", {"csrc/k.cu": "// 1\n"}),
                                      ("python", {UTILS: utils_source(slow_ms=2)})])
    first = InstalledBuild(commit=shas[0], python=sys.executable, package_dir=str(installed))
    assert overlay_for(repo, shas[2], [first]) is None  # the kernel change sits between
    second = InstalledBuild(commit=shas[1], python="/venv/bin/python", package_dir="/x/vllm")
    plan = overlay_for(repo, shas[2], [first, second])
    assert plan.base == second and plan.files == [UTILS]


def test_an_import_error_names_the_line_that_failed(tmp_path):
    installed = install_package(tmp_path)
    broken = b"from vllm.v1.structured_output.backend import missing_name\n"
    folder = overlay.build_overlay(installed, tmp_path / "ov",
                                   {"vllm/v1/structured_output/request.py": broken})
    failures = overlay.import_failures(sys.executable, overlay.overlay_env(folder, {}),
                                       ["vllm.v1.structured_output.request"])
    error = failures["vllm.v1.structured_output.request"]
    assert error.startswith("ImportError: cannot import name 'missing_name'")
    assert error.endswith("(at vllm/v1/structured_output/request.py:1)")
