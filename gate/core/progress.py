"""Progress lines on stderr: elapsed time first, so a CI log shows where the time went."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, stream=None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.start = time.monotonic()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_update = 0.0
        self._open_line = False

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def __call__(self, message: str) -> None:
        if self.quiet:
            return
        self._close_line()
        print(f"[{self.elapsed():6.1f}s] {message}", file=self.stream, flush=True)

    def update(self, message: str) -> None:
        """A transient status: rewritten in place on a terminal, every 10 s in a log."""
        if self.quiet:
            return
        now = time.monotonic()
        if self.tty:
            print(f"\r[{self.elapsed():6.1f}s] {message}\033[K", end="", file=self.stream, flush=True)
            self._open_line = True
        elif now - self._last_update >= 10:
            print(f"[{self.elapsed():6.1f}s]   ... {message}", file=self.stream, flush=True)
            self._last_update = now

    def _close_line(self) -> None:
        if self._open_line:
            print(file=self.stream)
            self._open_line = False
