"""`gate`: parse the command line, read the settings once, run one command, and turn every
outcome into an exit code (no tracebacks for users; README "Exit codes")."""

from __future__ import annotations

import argparse
import importlib
import sys

from gate import __version__
from gate.cli.common import Terminated, sigterm_unwinds
from gate.core.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_TERMINATED, GateError
from gate.core.settings import Settings
from gate.github.workflow_commands import safe_std_streams

# Every subcommand, in the order `gate --help` lists them: the modules of gate/cli/.
COMMANDS = (
    "doctor", "run", "ab", "bisect", "calibrate", "compare", "verdict", "baseline", "hunks", "scope", "profile",
    "report", "publish", "trust", "artifact", "annotate", "install_vllm", "tiny_model", "corpus",
    "export", "fingerprint", "plan", "history", "buildkite",
)
COMMAND_NAMES = {name.replace("_", "-"): name for name in COMMANDS}


def chosen_command(argv: list[str]) -> str | None:
    """The command module named by argv (its first word that is not an option), if any."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return COMMAND_NAMES.get(first) if first else None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given argv that names a command, only that command's module is imported,
    so that `gate publish` or `gate trust` runs on the token jobs' small dependency set
    (docs/security.md, "Hash-pinned installs in the token jobs")."""
    parser = argparse.ArgumentParser(
        prog="gate", description="CI regression gate for vLLM structured-output performance.")
    parser.add_argument("--version", action="version", version=f"gate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    argv = argv or []
    only = chosen_command(argv)
    if only is None and "--version" in argv:
        return parser  # the version alone needs no command module (the action asks for it)
    for name in COMMANDS:
        if only is None or name == only:
            importlib.import_module(f"gate.cli.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    with safe_std_streams():
        argv = sys.argv[1:] if argv is None else argv
        parser = build_parser(argv)
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
