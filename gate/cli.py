"""The `gate` command line. Each stage module registers its own subcommand; this module only
dispatches and turns `GateError` into a message and an exit code (no tracebacks for users)."""

from __future__ import annotations

import argparse
import importlib
import sys

from gate import __version__
from gate.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, GateError

# Modules with a `register(subparsers)` function; each adds one subcommand (or a group) and
# sets `func` on its parser. Order is the order of `gate --help`.
COMMAND_MODULES = (
    "gate.run_cli",
    "gate.ab_cli",
    "gate.tiny_model",
    "gate.export",
    "gate.fingerprint_cli",
    "gate.publish_cli",
    "gate.install_vllm",
    "gate.compare_cli",
    "gate.hunks_cli",
    "gate.report_cli",
    "gate.profile_cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gate",
        description="CI regression gate for vLLM structured-output performance.",
    )
    parser.add_argument("--version", action="version", version=f"gate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        return int(args.func(args) or 0)
    except GateError as exc:
        print(f"gate: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gate: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
