"""stdout and stderr as a GitHub runner reads them.

A runner (actions/runner, ActionCommand.cs) takes an output line as a workflow command in two
ways: a line that starts with `::` once .NET's TrimStart() has removed its leading whitespace
(every Unicode space: U+00A0, U+3000, U+2028, ...), and, in the legacy form, a line that holds
`##[` anywhere, followed by a command name and `]`. Its comparisons are culture-aware, which
can pass over invisible characters (U+200B, U+2060, U+FEFF). The gate prints text it does not
control (file paths from a diff, key names from a JSON file, a server's log lines), so one
crafted name could print a live `::error title=Perf gate::PASS`. Every line the gate writes
goes through `SafeStream`, which holds each line until it ends and then, looking at it with
the invisible characters left out: breaks every `##[` (as `## [`) and quotes a line that starts
with `::` after any whitespace with a leading `|`. The gate's own annotations go out through
`workflow_command`, the one way past the filter, and are built by `format_command`, the one
place that escapes a command's data and properties (CR included: the runner ends a line at CR
as well as LF). action.yml prints its annotations with `gate annotate`, which uses the same
function.

The same wrapper survives a closed pipe (`gate compare ... | head -1`): output after the pipe
closes is dropped, so a command still exits with its verdict's code instead of dying with
BrokenPipeError (exit 1, the code that means "fail").
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import unicodedata
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

COMMAND_KEY = "::"
LEGACY_PREFIX = "##["
ANNOTATION_LEVELS = ("error", "warning", "notice")
_LINE_BREAK = re.compile(r"(\r\n|\r|\n)")  # the runner splits lines on all three
QUOTE = "|"
# Characters a culture-aware comparison may pass over: format (U+200B, U+2060, U+FEFF),
# control, combining, private-use and unassigned code points.
_INVISIBLE = {"Cf", "Cc", "Cs", "Co", "Cn", "Mn", "Me"}


def _visible(text: str) -> str:
    return "".join(c for c in text if c.isspace() or unicodedata.category(c) not in _INVISIBLE)


def safe_line(line: str) -> str:
    """One line (no line break) as the runner will not take it for a command: `##[` broken,
    a leading `::` (after any whitespace or invisible character) quoted."""
    seen = _visible(line)
    if LEGACY_PREFIX in seen:
        line = seen = seen.replace(LEGACY_PREFIX, "## [")
    return QUOTE + line if seen.lstrip().startswith(COMMAND_KEY) else line


class SafeStream(io.TextIOBase):
    def __init__(self, raw: TextIO):
        self.raw = raw
        self.pipe_closed = False
        self._at_line_start = True
        self._pending = ""  # the line so far: judged once it ends

    # -- the filter ------------------------------------------------------------------------
    def write(self, text: str) -> int:
        out = []
        for piece in _LINE_BREAK.split(text):
            if not piece:
                continue
            if _LINE_BREAK.fullmatch(piece):
                out += [safe_line(self._pending), piece]
                self._pending, self._at_line_start = "", True
            else:
                self._pending += piece
        self._emit("".join(out))
        return len(text)

    def write_command(self, line: str) -> None:
        """Write one workflow command of the gate's own (its data already escaped), on a line
        of its own."""
        self.finish_line()
        if not self._at_line_start:
            self._emit("\n")
        self._emit(line.rstrip("\n") + "\n")
        self._at_line_start = True

    def finish_line(self) -> None:
        """Write out the held line (the end of output, or before a command of the gate's own:
        it can no longer grow)."""
        if self._pending:
            pending, self._pending = self._pending, ""
            self._at_line_start = False
            self._emit(safe_line(pending))

    # -- the pipe --------------------------------------------------------------------------
    def _emit(self, text: str) -> None:
        if not text or self.pipe_closed:
            return
        try:
            self.raw.write(text)
        except BrokenPipeError:
            self._drop_output()

    def flush(self) -> None:
        if self.pipe_closed:
            return
        try:
            self.raw.flush()
        except BrokenPipeError:
            self._drop_output()

    def _drop_output(self) -> None:
        """The reader went away: send the rest, and the interpreter's final flush, nowhere."""
        self.pipe_closed = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.raw.fileno())
            os.close(devnull)

    # -- what callers ask of a text stream -------------------------------------------------
    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return bool(getattr(self.raw, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self.raw.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.raw, "encoding", "utf-8")


def escape_data(text: str) -> str:
    """A command's message: `%`, CR and LF escaped as the runner unescapes them."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command's property value (title, file, ...): also `:` and `,`."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_command(name: str, message: str, **properties: str) -> str:
    """One workflow command line, `::name key=value,...::message`, every part escaped."""
    props = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items())
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def workflow_command(stream: TextIO, line: str) -> None:
    """Print a workflow command of the gate's own on `stream`, past a SafeStream's filter."""
    if isinstance(stream, SafeStream):
        stream.write_command(line)
    else:
        print(line, file=stream)


@contextlib.contextmanager
def safe_std_streams() -> Iterator[tuple[SafeStream, SafeStream]]:
    """sys.stdout and sys.stderr wrapped in SafeStream for the block."""
    import sys

    saved = sys.stdout, sys.stderr
    out, err = SafeStream(saved[0]), SafeStream(saved[1])
    sys.stdout, sys.stderr = out, err
    try:
        yield out, err
    finally:
        for stream in (out, err):
            stream.finish_line()
            stream.flush()
        sys.stdout, sys.stderr = saved


def write_outputs(path: Path | None, values: dict[str, str]) -> None:
    """Append to GITHUB_OUTPUT in the heredoc form, which is safe for any value."""
    if path is None:
        return
    with path.open("a", encoding="utf-8") as fh:
        for name, value in values.items():
            delimiter = f"ghadelimiter_{uuid.uuid4()}"
            while delimiter in value:  # pragma: no cover - astronomically unlikely
                delimiter = f"ghadelimiter_{uuid.uuid4()}"
            fh.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
