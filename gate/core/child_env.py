"""The environment of a process that runs the code under test: pip building the PR's vLLM,
the PR's interpreter probed for torch's threads or pinned memory, `vllm serve`.

That code is the PR's, so it gets nothing that lets it act on the job around it: not the
runner's file commands (GITHUB_ENV and GITHUB_PATH set variables and PATH for every later
step, GITHUB_OUTPUT the step's outputs, GITHUB_STATE an action's post step, GITHUB_STEP_SUMMARY
the run's page) and no token. This is hygiene, not a wall: code of the same user can still
read its parents' environment in /proc. docs/action.md, "Running on a public repository",
says what a malicious approved commit can still do.
"""

from __future__ import annotations

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


def code_under_test_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the runner's file-command paths and tokens."""
    return {name: value for name, value in env.items() if name not in WITHHELD}
