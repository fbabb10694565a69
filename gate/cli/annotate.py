"""`gate annotate`: print one workflow annotation (error, warning, notice) with its title and
message escaped the one way every command of the gate is escaped
(gate/github/workflow_commands.py), so that untrusted text (a verdict's headline, which can
quote an error string from results.json) cannot end the line and start a command of its own.
action.yml's "Apply fail-on" step prints the failing verdict through it."""

from __future__ import annotations

import argparse
import sys

from gate.core.settings import Settings
from gate.github.workflow_commands import ANNOTATION_LEVELS, format_command, workflow_command


def add_parser(sub) -> None:
    p = sub.add_parser(
        "annotate",
        help="print a workflow annotation with its text escaped (CR, LF and %%)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("level", choices=ANNOTATION_LEVELS)
    p.add_argument("--title", default="", help="the annotation's title")
    p.add_argument("--message", required=True, help="the annotation's text (any characters)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace, settings: Settings) -> int:
    properties = {"title": args.title} if args.title else {}
    workflow_command(sys.stdout, format_command(args.level, args.message, **properties))
    return 0
