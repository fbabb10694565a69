"""Running git: an argument list (never a shell), a timeout, no prompts, and failures as
`GateError`s that say what the gate was doing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gate.core.errors import GateError

GIT_TIMEOUT_S = 120


def run_git(repo: Path | str, args: list[str | bytes], what: str,
            timeout_s: float = GIT_TIMEOUT_S) -> bytes:
    """`git -C repo ARGS`; stdout as bytes. Paths are never quoted (core.quotePath=false), the
    locale is C so messages are stable, and git never asks for credentials."""
    cmd: list[str | bytes] = ["git", "-C", str(repo), "-c", "core.quotePath=false", *args]
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        proc = subprocess.run(cmd, capture_output=True, env=env, timeout=timeout_s)
    except FileNotFoundError:
        raise GateError("git is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise GateError(f"git timed out after {timeout_s:.0f}s while {what}") from None
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GateError(f"git failed while {what}: {msg[-1] if msg else f'exit {proc.returncode}'}")
    return proc.stdout


def git_text(repo: Path | str, args: list[str], what: str) -> str:
    """`run_git` decoded and stripped, for commands that print one value (a SHA, names)."""
    return run_git(repo, list(args), what).decode("utf-8", "replace").strip()


def resolve_ref(repo: Path | str, ref: str) -> str:
    """The commit SHA `ref` names; a ref that does not exist is a GateError saying so."""
    if not ref or ref.startswith("-"):
        raise GateError(f"invalid git ref {ref!r}")
    try:
        out = run_git(repo, ["rev-parse", "--verify", "--quiet", "--end-of-options",
                             f"{ref}^{{commit}}"], f"resolving {ref!r}")
    except GateError:
        raise GateError(
            f"git ref {ref!r} does not exist in {repo} (fetch it first; in CI use "
            "actions/checkout with fetch-depth: 0)"
        ) from None
    return out.decode().strip()


def merge_base(repo: Path | str, base: str, head: str) -> str:
    try:
        out = run_git(repo, ["merge-base", base, head], "finding the merge-base")
    except GateError:
        raise GateError(
            f"{base[:12]} and {head[:12]} have no merge-base in {repo} (unrelated histories, "
            "or a shallow clone: fetch more history)"
        ) from None
    return out.decode().strip()


def first_parent_commits(repo: Path | str, good: str, bad: str) -> list[str]:
    """The commits of `bad`'s first-parent history after `good`, oldest first (`bad` last):
    what a bisect over merged PRs visits. `good` must lie on that history."""
    shas = git_text(repo, ["rev-list", "--first-parent", "--reverse", f"{good}..{bad}"],
                    "listing the commits between good and bad").split()
    if not shas:
        raise GateError(f"no commit between good {good[:12]} and bad {bad[:12]}: bad must be "
                        "a descendant of good")
    if first_parent(repo, shas[0]) != good:
        raise GateError(f"good {good[:12]} is not on the first-parent history of bad "
                        f"{bad[:12]}: pick a good commit of the same branch, older than bad")
    return shas


def first_parent(repo: Path | str, sha: str) -> str | None:
    """`sha`'s first parent, None for a root commit."""
    try:
        return git_text(repo, ["rev-parse", "--verify", "--quiet", f"{sha}^1"],
                        f"reading the parent of {sha[:12]}")
    except GateError:
        return None


def commit_subject(repo: Path | str, sha: str) -> str:
    return git_text(repo, ["log", "-1", "--format=%s", sha, "--"], f"reading {sha[:12]}'s subject")


def changed_paths(repo: Path | str, old: str, new: str) -> list[tuple[str, str]]:
    """(status letter, path) for every file that differs between two commits; renames are a
    deletion and an addition, so every path is one file of one side."""
    raw = run_git(repo, ["diff", "--name-status", "-z", "--no-renames", old, new],
                  f"listing the files {old[:12]}..{new[:12]} changes")
    parts = raw.decode("utf-8", "replace").split("\0")
    return [(parts[i][:1], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]


def file_at(repo: Path | str, sha: str, path: str) -> bytes:
    return run_git(repo, ["show", f"{sha}:{path}"], f"reading {path} at {sha[:12]}")


def apply_patch(worktree: Path, patch_file: Path) -> None:
    """`git apply` a patch to the files of `worktree`, the top folder of a repository (a
    scratch `git init` where the files are not tracked): paths resolve from that folder
    whatever repository encloses it, and a hunk whose context does not match fails."""
    run_git(worktree, ["apply", "--whitespace=nowarn", str(patch_file.resolve())],
            f"applying {patch_file.name} in {worktree}")
