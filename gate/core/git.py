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
