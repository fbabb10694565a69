"""The environment and working folder of a process that runs the code under test: pip building
the PR's vLLM, the build's interpreter probed for its versions, torch's threads or pinned
memory, an import check, `vllm serve`.

Two things, for two reasons:

- **Which vLLM it imports.** `python -c` and `python -m` put the working directory first on
  `sys.path`. A PR job's working directory is the PR's vLLM checkout, so a base server started
  there imports the PR's `vllm/` and the A/B is an A/A that reports the base's version. A
  process that runs a build's vLLM therefore starts in an empty scratch folder
  (`scratch_cwd`) with `PYTHONSAFEPATH=1` (Python 3.11+; the folder alone covers 3.10), and a
  relative `PYTHONPATH` entry is made absolute against the gate's own working directory first,
  so that `--head-env PYTHONPATH=tests/fixtures/...` still means what it meant.
- **What it can reach.** That code is the PR's, so it gets nothing that lets it act on the job
  around it: not the runner's file commands (GITHUB_ENV and GITHUB_PATH set variables and PATH
  for every later step, GITHUB_OUTPUT the step's outputs, GITHUB_STATE an action's post step,
  GITHUB_STEP_SUMMARY the run's page) and no token. This is hygiene, not a wall: code of the
  same user can still read its parents' environment in /proc. docs/security.md, "Running on a
  public repository", says what a malicious approved commit can still do.

pip's build of a vLLM checkout (gate install-vllm) is the one exception to the scratch folder:
a build backend runs in the source tree by design, so it gets `safe_path=False` and its own cwd.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Mapping

WORKFLOW_FILE_VARS = (
    "GITHUB_ENV",
    "GITHUB_OUTPUT",
    "GITHUB_PATH",
    "GITHUB_STATE",
    "GITHUB_STEP_SUMMARY",
)
TOKEN_VARS = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "INPUT_GITHUB-TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
)
WITHHELD = frozenset(WORKFLOW_FILE_VARS + TOKEN_VARS)

_scratch: str | None = None


def code_under_test_env(env: Mapping[str, str], *, safe_path: bool = True) -> dict[str, str]:
    """`env` without the runner's file-command paths and tokens; with `safe_path`, also
    PYTHONSAFEPATH=1 and every PYTHONPATH entry absolute (the child starts in `scratch_cwd`)."""
    out = {name: value for name, value in env.items() if name not in WITHHELD}
    if safe_path:
        out["PYTHONSAFEPATH"] = "1"
        if out.get("PYTHONPATH"):
            out["PYTHONPATH"] = absolute_path_list(out["PYTHONPATH"])
    return out


def absolute_path_list(value: str) -> str:
    """A PYTHONPATH-style list with each relative entry resolved against this process's
    working directory (an empty entry, which Python reads as the working directory, dropped)."""
    return os.pathsep.join(os.path.abspath(p) for p in value.split(os.pathsep) if p)


def scratch_cwd() -> str:
    """An empty folder of this gate process, removed at exit: the working directory of every
    child that runs a build's code, so that nothing in the caller's folder is importable."""
    global _scratch
    if _scratch is None or not os.path.isdir(_scratch):
        _scratch = tempfile.mkdtemp(prefix="gate-cwd-")
        atexit.register(shutil.rmtree, _scratch, ignore_errors=True)
    return _scratch
