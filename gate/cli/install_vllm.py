"""`gate install-vllm`: put the PR's vLLM build into a runner's virtualenv."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from gate.core.settings import Settings
from gate.runner import install, wheels


def add_parser(sub) -> None:
    p = sub.add_parser(
        "install-vllm",
        help="install the PR's vLLM build into a virtualenv (precompiled, source, wheel)",
        description=install.__doc__.split("\n\n", 1)[1] if install.__doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--mode", required=True, choices=install.MODES)
    p.add_argument("--python", required=True, help="the target virtualenv's python")
    p.add_argument("--src", type=Path, help="vLLM source checkout (precompiled, source)")
    p.add_argument("--base-ref", default="origin/main", help="merge-base ref (precompiled)")
    p.add_argument("--wheel", help="wheel URL or path (wheel mode)")
    p.add_argument("--max-jobs", type=int, help="MAX_JOBS for source builds (default: one per CPU, at most one per "
                   f"{install.GIB_PER_BUILD_JOB} GiB of available memory)")
    p.add_argument("--variant", help="precompiled: the CUDA variant of the merge base's wheel, "
                   "e.g. cu129 (VLLM_PRECOMPILED_WHEEL_VARIANT; default: vLLM's choice)")
    p.add_argument("--wheel-index", default=wheels.DEFAULT_INDEX,
                   help="where precompiled wheels are listed, a URL or a folder laid out "
                   "like it; looked in for other variants when the merge base has no wheel "
                   "(default: %(default)s, where vLLM's setup.py downloads from)")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.set_defaults(handler=handle)


def handle(args, settings: Settings) -> int:
    plan = install.plan_install(install.InstallRequest(
        args.mode, args.python, src=args.src, base_ref=args.base_ref, wheel=args.wheel,
        max_jobs=args.max_jobs, variant=args.variant, wheel_index=args.wheel_index))
    for note in plan.notes:
        print(f"gate install-vllm: {note}", file=sys.stderr)
    print(
        f"mode: {plan.mode}"
        + (f" (requested {plan.requested})" if plan.mode != plan.requested else "")
    )
    if plan.merge_base:
        print(f"merge-base: {plan.merge_base}")
    print(f"expected: {install.EXPECTED[plan.mode].format(jobs=plan.max_jobs)}")
    if args.dry_run:
        for step in plan.steps:
            print(step.render())
        if plan.mode == "preinstalled":
            print(shlex.join([args.python, "-c", install.VERSION_PROBE]))
        return 0
    install.run_install(plan)
    print(f"vllm {install.installed_vllm_version(args.python)} ({args.python})")
    return 0
