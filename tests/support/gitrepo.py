"""Real git repositories built in tmp_path. git runs with a fixed identity and without the
machine's or the user's git configuration, so a test sees the same git wherever it runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from support.trees import write

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "HOME": "/nonexistent",
}


def git(repo: Path, *args: str) -> str:
    """Run `git -C repo args...`; its stdout, stripped. A failure fails the test with git's
    message."""
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          encoding="utf-8", env={**os.environ, **GIT_ENV}, timeout=120)
    if proc.returncode:
        raise AssertionError(f"git {' '.join(args)} failed in {repo}:\n{proc.stderr}")
    return proc.stdout.strip()


def init(path: Path, branch: str = "main") -> Path:
    """An empty repository at `path` (created if missing) on `branch`."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    return path


def commit(repo: Path, message: str, files: dict[str, str | bytes] | None = None) -> str:
    """Write `files` (path in the repo -> content), commit everything; the new commit's SHA."""
    for rel, content in (files or {}).items():
        write(repo, rel, content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")
