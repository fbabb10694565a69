"""The README's tested command block, and running it as written (tests/e2e)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from support.paths import REPO_ROOT

MARKER = "<!-- readme-commands: tested on CPU -->"
EXIT = re.compile(r"\(exit (\d)(?: or (\d))?\)")


def readme_commands() -> list[tuple[str, set[int]]]:
    """The tested block: each command and the exit codes its comment allows (default 0)."""
    text = (REPO_ROOT / "README.md").read_text()
    block = text.split(MARKER, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    out = []
    for line in block.strip().splitlines():
        command, _, comment = line.partition("  #")
        codes = EXIT.search(comment)
        allowed = {int(c) for c in codes.groups() if c} if codes else {0}
        out.append((command.strip(), allowed))
    return out


def run_readme(folder: Path) -> list[tuple[str, set[int], subprocess.CompletedProcess]]:
    """Run the block in order in `folder`, which sees the repository's tests/ (the fixture)."""
    (folder / "tests").symlink_to(REPO_ROOT / "tests")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    runs = []
    for command, allowed in readme_commands():
        proc = subprocess.run(shlex.split(command), cwd=folder, env=env, capture_output=True,
                              text=True, timeout=1500)
        runs.append((command, allowed, proc))
    return runs
