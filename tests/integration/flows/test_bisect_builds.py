"""The builds a bisect measures (gate.flows.bisect_builds), over a stand-in installed build
and a real repository: the installed commit as it is, others as overlays, replacements over
them, a commit that needs a real install refused when installs are off, and the import check
that blames only what the reference build imports."""

from __future__ import annotations

import pytest
from support.bisect_repo import (
    BACKEND,
    UTILS,
    install_package,
    make_repo,
    stand_in_python,
    utils_source,
)

from gate.flows.bisect_builds import NotBuilt, StepBuilds, fresh_folder
from gate.runner.commit_build import InstalledBuild


@pytest.fixture
def builds(tmp_path):
    installed = install_package(tmp_path)
    repo, shas = make_repo(tmp_path, [
        ("slow", {UTILS: utils_source(slow_ms=3)}),
        ("broken", {BACKEND: "import vllm.v1.nothing_here\n"}),
        ("kernel", {"csrc/k.cu": "// k\n"}),
    ])
    python = stand_in_python(tmp_path, installed)
    base = InstalledBuild(commit=shas[0], python=python, package_dir=str(installed))
    return StepBuilds(repo, [base], "none"), shas


def test_the_installed_commit_is_served_as_installed(builds, tmp_path):
    steps, shas = builds
    build = steps.build(shas[0], tmp_path / "b0")
    assert build.env == {"PYTHONSAFEPATH": "1"} and build.overlay_files == []
    assert build.how.startswith(f"the build of {shas[0][:12]} as installed")


def test_a_python_change_is_an_overlay_and_replacements_go_over_it(builds, tmp_path):
    steps, shas = builds
    build = steps.build(shas[1], tmp_path / "b1")
    assert build.overlay_files == [UTILS]
    overlay = build.env["PYTHONPATH"].split(":")[0]
    assert "SLOW_MS = 3" in (tmp_path / "b1" / "overlay" / UTILS).read_text()
    assert overlay == str((tmp_path / "b1" / "overlay").resolve())
    replaced = steps.build(shas[1], tmp_path / "b1r", replace={UTILS: b"SLOW_MS = 9\n",
                                                                BACKEND: None})
    assert (tmp_path / "b1r" / "overlay" / UTILS).read_text() == "SLOW_MS = 9\n"
    assert not (tmp_path / "b1r" / "overlay" / BACKEND).exists()
    assert replaced.overlay_files == sorted([UTILS, BACKEND])


def test_a_compiled_change_needs_an_install_which_none_refuses(builds, tmp_path):
    steps, shas = builds
    with pytest.raises(NotBuilt, match="changes more than Python files and --install is none"):
        steps.build(shas[3], tmp_path / "b3")


def test_the_import_check_blames_the_build_not_the_reference(builds, tmp_path):
    steps, shas = builds
    good = steps.build(shas[0], tmp_path / "good")
    broken = steps.build(shas[2], tmp_path / "b2")
    modules = steps.changed_modules(shas[0], shas[2])
    assert "vllm.v1.structured_output.backend" in modules and "csrc" not in str(modules)
    problem = steps.import_problem(broken, good, modules)
    assert problem.startswith("vllm.v1.structured_output.backend does not import: "
                              "ModuleNotFoundError")
    # a module that fails in the reference too (GPU-only code on a CPU runner) is no blame
    assert steps.import_problem(broken, broken, modules) is None


def test_fresh_folder_clears_what_an_unfinished_step_left(tmp_path):
    folder = tmp_path / "steps" / "02-abc"
    folder.mkdir(parents=True)
    (folder / "partial.json").write_text("{")
    assert list(fresh_folder(folder).iterdir()) == []
