"""The `gate` command line: one module per command, each thin over the library below it.

Nothing in the library imports from this package. `gate.cli.main.COMMANDS` is the one list of
subcommands; every command module has `add_parser(subparsers)` and `handle(args, settings)`.
"""

from gate.cli.main import main

__all__ = ["main"]
