"""Running one `run:` step of a shipped workflow the way a runner does: `bash --noprofile
--norc -eo pipefail`, the workflow's and the step's `env:` (expressions resolved from a small
context), GITHUB_* files and variables set, the gate importable from this checkout."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from support.paths import REPO_ROOT
from support.workflows import step

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def resolve(context: dict, text: object) -> str:
    def lookup(match: re.Match) -> str:
        expr = match.group(1)
        if " || " in expr:  # `a || 'b'`: the first that is set
            first, default = expr.split(" || ", 1)
            value = resolve(context, "${{ " + first + " }}")
            return value or default.strip("'")
        value: object = context
        for part in expr.split("."):
            assert isinstance(value, dict) and part in value, f"cannot resolve {expr!r}"
            value = value[part]
        return "" if value is None else str(value)

    return EXPR.sub(lookup, str(text))


def run_workflow_step(doc: dict, job: str, name: str, cwd: Path, *, context: dict | None = None,
                      extra_env: dict | None = None) -> subprocess.CompletedProcess:
    spec = step(doc, job, name)
    assert spec.get("shell") == "bash" and EXPR.search(spec["run"]) is None
    context = {"env": doc.get("env", {}), "inputs": {}, "matrix": {}, "github": {},
               **(context or {})}
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO_ROOT),
        "HOME": os.environ.get("HOME", str(cwd)),
        "LANG": "C.UTF-8",
        "GITHUB_OUTPUT": str(cwd / "github-output"),
        "GITHUB_SERVER_URL": "https://github.com",
        "RUNNER_TEMP": str(cwd),
        **{k: str(v) for k, v in doc.get("env", {}).items()},
        **{k: resolve(context, v) for k, v in (spec.get("env") or {}).items()},
        **(extra_env or {}),
    }
    script = cwd / "step.sh"
    script.write_text(spec["run"])
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
