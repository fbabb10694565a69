"""User-facing errors and the process exit codes of every `gate` command.

A `GateError` is something the user can act on (bad plan, unreachable server, missing file):
the CLI prints its message without a traceback and exits with `EXIT_BAD_INPUT` unless the
error says otherwise.
"""

from __future__ import annotations

# Exit codes, documented in README.md ("Exit codes"). A workflow fails on 1 and 4 and may
# stay neutral on 3.
EXIT_PASS = 0
EXIT_FAIL = 1  # a real slowdown past its threshold
EXIT_BAD_INPUT = 2  # usage error, broken plan/baseline file, missing ref, unreachable server
EXIT_INCONCLUSIVE = 3  # noise wider than the threshold: rerun with more repeats
EXIT_ERROR = 4  # the measurement itself is broken (failed requests, dead server, bad JSON)
EXIT_UNDECIDED = 5  # not decided on this runner (no calibration, too noisy, a budget too small)
EXIT_INTERRUPTED = 130  # Ctrl-C
EXIT_TERMINATED = 143  # SIGTERM (a cancelled CI job)


class GateError(Exception):
    """An error with a message meant for the user; no traceback is shown."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, *, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class MeasurementError(GateError):
    """The measurement is broken (server died, never became healthy, requests failed)."""

    exit_code = EXIT_ERROR
