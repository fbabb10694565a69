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


def origin_and_clone(tmp_path: Path) -> tuple[Path, Path]:
    """A bare `origin.git` with one empty commit on main, and a clone of it at `work` (a
    workflow's checkout, whose pushes the test reads back from the origin)."""
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(tmp_path, "clone", "-q", str(origin), str(work))
    git(work, "commit", "-q", "--allow-empty", "-m", "base")
    git(work, "push", "-q", "origin", "HEAD:refs/heads/main")
    return origin, work


def recording_shims(folder: Path, log: Path, tools: dict[str, str], extra: str = "") -> Path:
    """Scripts named after `tools` (name -> the program to run) in `folder`: each appends its
    command line (NUL-separated, one line a call) to `log`, runs `extra` (bash, with $TOOL set
    to its name), then execs the program. Put `folder` first on PATH: what the log holds is
    what /proc/PID/cmdline showed."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, target in tools.items():
        shim = folder / name
        shim.write_text("#!/usr/bin/env bash\n"
                        f"TOOL={name}\n"
                        f'printf "%s\\0" {name} "$@" >> {log}; printf "\\n" >> {log}\n'
                        f"{extra}\n"
                        f'exec {target} "$@"\n')
        shim.chmod(0o755)
    return folder
