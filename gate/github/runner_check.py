"""`gate trust check-runner`: is this runner fresh and isolated, and the job's caches its own
(gate.runner.isolation; docs/security.md, "Provisioning a GPU runner").

The GPU jobs run it first, before anything is installed and before any code under test, as
`/usr/bin/python3 -I -S .gate/scripts/check_runner.py` from the gate checked out at its pinned
commit: no site-packages, no PYTHONPATH, no user site, nothing the job or an earlier job could
have installed. So this module, and everything it imports, is standard library only
(tests/unit/github/test_runner_check.py runs it that way). `gate trust check-runner` is the
same check from an installed gate.

It prints every problem (`gate trust: refused: ...`) and exits 1 when there is one; else it
creates RUNNER_TEMP/perf-gate-caches and writes to GITHUB_ENV the variables that point the
compile caches and the gate's cache there and load the models read-only and offline.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from gate.core.errors import EXIT_FAIL, GateError
from gate.github.workflow_commands import safe_std_streams, write_outputs
from gate.runner import isolation

JOB_CACHE = "perf-gate-caches"
DESCRIPTION = (
    "Before any code under test: the provisioning's marker (this boot, this runner, "
    "root-owned) and a runner log folder of this job only, no process of the job's user left "
    "from before, no git or pip configuration or PATH folder an earlier job could have "
    "written, a read-only model cache, no cache left from before, no instance metadata. On "
    "success the compile caches and the gate's cache go to a folder of this job and the Hub "
    "offline, through GITHUB_ENV (docs/action.md).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--marker", type=Path, default=isolation.DEFAULT_MARKER,
                   help=f"the provisioning's marker (default {isolation.DEFAULT_MARKER})")
    p.add_argument("--marker-owner", type=int, default=0, metavar="UID",
                   help="who writes the marker (default 0, root)")
    p.add_argument("--model-cache", type=Path, required=True,
                   help="the Hugging Face hub cache the provisioning mounted read-only")
    p.add_argument("--metadata", action="append", metavar="HOST:PORT",
                   help="an instance metadata endpoint that must not answer (repeatable; "
                   f"default {isolation.DEFAULT_METADATA[0]})")
    p.add_argument("--job-cache", type=Path,
                   help=f"the job's cache folder (default RUNNER_TEMP/{JOB_CACHE})")


def runner_problems(args: argparse.Namespace, environ: Mapping[str, str],
                    user: isolation.JobUser) -> list[str]:
    """Every reason this runner is not fit to run the job's code; [] when none is found."""
    boot_id = isolation.BOOT_ID.read_text().strip() if isolation.BOOT_ID.exists() else ""
    marker = isolation.MarkerCheck(args.marker, boot_id, environ.get("RUNNER_NAME") or None,
                                   args.marker_owner)
    table = isolation.process_table()
    me = os.getpid()
    return (isolation.marker_problems(marker, user)
            + isolation.runner_log_problems(isolation.job_worker(table, me))
            + isolation.leftover_problems(table, me, user.uid)
            + isolation.config_problems(user, environ)
            + isolation.path_problems(user, environ.get("PATH", ""))
            + isolation.model_cache_problems(args.model_cache, user)
            + isolation.stale_cache_problems(isolation.default_cache_dirs(user))
            + isolation.metadata_problems(args.metadata or isolation.DEFAULT_METADATA))


def check_runner(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """The check; exit 0 with the job's caches set up, or a GateError (exit 1) after the
    problems are printed."""
    user = isolation.JobUser.current()
    temp = environ.get("RUNNER_TEMP")
    job_cache = args.job_cache or (Path(temp) / JOB_CACHE if temp else None)
    if job_cache is None:
        raise GateError("--job-cache is needed outside a runner (RUNNER_TEMP is not set)")
    if not environ.get("GITHUB_ENV"):
        raise GateError("GITHUB_ENV is not set: nothing would point the caches at this job")
    problems = runner_problems(args, environ, user)
    for problem in problems:
        print(f"gate trust: refused: {problem}", file=sys.stderr)
    if problems:
        raise GateError(f"this runner is not fit to run a job's code ({len(problems)} "
                        "problem(s) above); see docs/security.md, 'Provisioning a GPU runner'",
                        exit_code=EXIT_FAIL)
    caches = isolation.prepare_job_caches(job_cache, args.model_cache)
    write_outputs(Path(environ["GITHUB_ENV"]), caches.env)
    print(f"gate trust: runner {environ.get('RUNNER_NAME')} is fresh and isolated; caches in "
          f"{caches.root}, models read-only and offline from {caches.model_cache}")
    return 0


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """scripts/check_runner.py: the same check, its exit code, no traceback."""
    with safe_std_streams():
        parser = argparse.ArgumentParser(prog="check_runner.py", description=DESCRIPTION)
        add_arguments(parser)
        args = parser.parse_args(argv)
        try:
            return check_runner(args, os.environ if environ is None else environ)
        except GateError as exc:
            print(f"gate: error: {exc}", file=sys.stderr)
            return exc.exit_code
