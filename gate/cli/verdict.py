"""`gate verdict --error REASON`: write the verdict of a run that could not be judged.

The action's Compare step calls it when no verdict came out of `gate compare` (the head
results are missing or unreadable, the measurement died), so that the report, the comment and
the exit code still say "error" (exit 4) through the same files as any other verdict.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gate.core.errors import GateError
from gate.core.settings import Settings
from gate.judge.verdict import MODES, error_verdict, save_verdict


def add_parser(sub) -> None:
    p = sub.add_parser(
        "verdict",
        help="write an error verdict for a run that could not be judged",
        description="Write verdict.json with outcome error, the given reason as its headline "
        "and error, and exit 4. Never replaces a verdict that exists.",
    )
    p.add_argument("--error", required=True, metavar="REASON", help="why there is no verdict")
    p.add_argument("--mode", choices=MODES, default="baseline", help="what the run compared against")
    p.add_argument("--out", required=True, type=Path, help="the verdict file to write")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace, settings: Settings) -> int:
    if args.out.exists():
        raise GateError(f"{args.out} exists: an error verdict never replaces a verdict")
    verdict = error_verdict(args.error, args.mode)
    save_verdict(verdict, args.out)
    print(f"gate verdict: wrote {args.out} ({verdict.headline})", file=sys.stderr)
    return verdict.exit_code
