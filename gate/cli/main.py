"""`gate`: parse the command line, read the settings once, run one command, and turn every
outcome into an exit code (no tracebacks for users; README "Exit codes")."""

from __future__ import annotations

import argparse
import sys

from gate import __version__
from gate.cli import (
    ab,
    baseline,
    calibrate,
    compare,
    corpus,
    doctor,
    export,
    fingerprint,
    hunks,
    install_vllm,
    profile,
    publish,
    report,
    run,
    tiny_model,
    trust,
    verdict,
)
from gate.cli.common import Terminated, sigterm_unwinds
from gate.core.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_TERMINATED, GateError
from gate.core.settings import Settings
from gate.github.workflow_commands import safe_std_streams

# Every subcommand, in the order `gate --help` lists them.
COMMANDS = (
    doctor, run, ab, calibrate, compare, verdict, baseline, hunks, profile, report, publish,
    trust, install_vllm, tiny_model, corpus, export,
    fingerprint,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gate", description="CI regression gate for vLLM structured-output performance.")
    parser.add_argument("--version", action="version", version=f"gate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    with safe_std_streams():
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "handler", None):
            parser.print_help()
            return EXIT_BAD_INPUT
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        with sigterm_unwinds():
            return int(args.handler(args, Settings.from_env()))
    except GateError as exc:
        print(f"gate: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gate: interrupted (Ctrl-C); servers stopped, nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print("gate: terminated (SIGTERM); servers stopped, nothing written", file=sys.stderr)
        return EXIT_TERMINATED
