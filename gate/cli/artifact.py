"""`gate artifact fetch`: unpack the results an earlier run of one commit left, for a rerun
that continues its sequential test (`gate ab --continue-from`; gate.github.artifacts, which
says which runs count: the workflow's own `pull_request_target` runs of the default branch's
file and `workflow_dispatch` runs of --dispatch-branch's, whose title names the commit).

Needs GITHUB_TOKEN with `actions: read`, GITHUB_REPOSITORY and GITHUB_API_URL. Writes the
step outputs `found` (true/false), `run-id` and `run-url`. Exit 0 whether or not an earlier
run was found (none: a new test); 4 when GitHub could not tell.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from gate.core.errors import GateError
from gate.core.settings import Settings
from gate.github import artifacts
from gate.github.trust import client_for
from gate.github.workflow_commands import write_outputs

WORKFLOW_FILE_RE = re.compile(r"[A-Za-z0-9_.-]{1,100}\.ya?ml")
ARTIFACT_NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,100}")
BRANCH_RE = re.compile(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "artifact", help="fetch an earlier run's results of one commit (a rerun's resume)",
        description=__doc__.split("\n\n")[0])
    actions = p.add_subparsers(dest="artifact_command", metavar="ACTION", required=True)
    fetch = actions.add_parser("fetch", help="find the newest run of WORKFLOW at SHA that kept "
                               "an artifact NAME, and unpack it into OUT")
    fetch.add_argument("--workflow", action="append", required=True, metavar="FILE",
                       help="a workflow file name, e.g. gate-pr.yml (repeatable)")
    fetch.add_argument("--sha", required=True, help="the commit (40 hex characters)")
    fetch.add_argument("--name", action="append", required=True,
                       help="the artifact's name (repeatable: the first found is taken)")
    fetch.add_argument("--out", type=Path, required=True, help="folder to unpack into (new)")
    fetch.add_argument("--dispatch-branch", metavar="BRANCH",
                       help="the branch a workflow_dispatch run must have run from (the "
                       "rerun's perf-gate/sandbox; default: the default branch)")
    fetch.set_defaults(handler=handle)


def handle(args: argparse.Namespace, settings: Settings) -> int:
    if not re.fullmatch(r"[0-9a-f]{40}", args.sha):
        raise GateError("--sha must be a full 40-character lowercase commit SHA")
    if args.dispatch_branch is not None and not BRANCH_RE.fullmatch(args.dispatch_branch):
        raise GateError(f"--dispatch-branch {args.dispatch_branch!r} is not a branch name")
    for workflow in args.workflow:
        if not WORKFLOW_FILE_RE.fullmatch(workflow):
            raise GateError(f"--workflow {workflow!r} is not a workflow file name")
    for name in args.name:
        if not ARTIFACT_NAME_RE.fullmatch(name):
            raise GateError(f"--name {name!r} is not an artifact name")
    if args.out.exists() and any(args.out.iterdir()):
        raise GateError(f"--out {args.out} is not empty: an artifact is unpacked into a new folder")
    client = client_for(settings)
    earlier = artifacts.find_earlier_run(client, workflows=args.workflow, sha=args.sha,
                                         names=args.name, dispatch_branch=args.dispatch_branch)
    if earlier is None:
        print(f"gate artifact: no earlier run of {', '.join(args.workflow)} at {args.sha} kept "
              f"{' or '.join(args.name)}: a new test", file=sys.stderr)
        write_outputs(settings.output, {"found": "false", "run-id": "", "run-url": ""})
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    files = artifacts.download(client, earlier, args.out)
    print(f"gate artifact: {earlier.artifact} of run {earlier.run_id} ({earlier.workflow}): "
          f"{len(files)} files in {args.out}", file=sys.stderr)
    write_outputs(settings.output, {"found": "true", "run-id": str(earlier.run_id),
                                    "run-url": earlier.url})
    return 0
