"""Running `gate` from a test, one way in each flavour; both answer a CompletedProcess
(returncode, stdout, stderr), so a test reads the same either way.

- `gate_in_process(*args)`: `gate.cli.main` in this interpreter with stdout and stderr
  captured, for tests that monkeypatch the library or read the exit code fast;
- `gate_subprocess(*args)`: `python -m gate.cli` as a child process, for what only a real
  process shows (exit status, streams as a runner reads them, signals, the environment);
- `gate_command(*args)`: that child's argv, for tests that start it themselves (Popen).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from gate.cli import main
from support.paths import REPO_ROOT

Arg = str | Path


def gate_in_process(*args: Arg) -> subprocess.CompletedProcess[str]:
    """`gate ARGS` through gate.cli.main, its output captured (no pytest capsys needed)."""
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse: --help, --version, a usage error
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return subprocess.CompletedProcess(["gate", *argv], code, out.getvalue(), err.getvalue())


def gate_command(*args: Arg) -> list[str]:
    return [sys.executable, "-m", "gate.cli", *(str(a) for a in args)]


def gate_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: ours without the GITHUB_* variables of whatever CI runs the
    tests (a test says which it means), plus `env`, and this checkout first on PYTHONPATH so
    the child imports the gate under test from any working folder."""
    merged = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    merged.update(env or {})
    merged["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), merged.get("PYTHONPATH")]))
    return merged


def gate_subprocess(*args: Arg, env: Mapping[str, str] | None = None, cwd: Path = REPO_ROOT,
                    timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """`python -m gate.cli ARGS` in `cwd`, with `gate_env(env)`."""
    return subprocess.run(gate_command(*args), capture_output=True, text=True, cwd=cwd,
                          env=gate_env(env), timeout=timeout)
