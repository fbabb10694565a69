"""stdout and stderr as a GitHub runner reads them.

A runner treats every output line that starts (after spaces) with `::` or `##[` as a workflow
command: `::error ...`, `::add-mask::`, `::stop-commands::`. The gate prints text it does not
control (file paths from a diff, key names from a JSON file, a server's log lines), so one
crafted name could print a live `::error title=Perf gate::PASS`. Every line the gate writes
goes through `SafeStream`, which quotes such lines with a leading `|`; the gate's own
annotations go out through `workflow_command`, the one way past the filter, and are built by
`format_command`, the one place that escapes a command's data and properties (CR included:
the runner ends a line at CR as well as LF). action.yml prints its annotations with
`gate annotate`, which uses the same function.

The same wrapper survives a closed pipe (`gate compare ... | head -1`): output after the pipe
closes is dropped, so a command still exits with its verdict's code instead of dying with
BrokenPipeError (exit 1, the code that means "fail").
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

COMMAND_PREFIXES = ("::", "##[")
ANNOTATION_LEVELS = ("error", "warning", "notice")
_LINE_BREAK = re.compile(r"(\r\n|\r|\n)")  # the runner splits lines on all three
QUOTE = "|"


def _may_become_command(start: str) -> bool:
    """True while the beginning of a line could still turn into a command prefix."""
    stripped = start.lstrip(" \t")
    return any(p.startswith(stripped) for p in COMMAND_PREFIXES)


class SafeStream(io.TextIOBase):
    def __init__(self, raw: TextIO):
        self.raw = raw
        self.pipe_closed = False
        self._at_line_start = True
        self._pending = ""  # the start of a line that could still become a command

    # -- the filter ------------------------------------------------------------------------
    def write(self, text: str) -> int:
        out = []
        for piece in _LINE_BREAK.split(text):
            if not piece:
                continue
            if _LINE_BREAK.fullmatch(piece):
                out += [self._pending, piece]
                self._pending, self._at_line_start = "", True
            elif self._at_line_start:
                start = self._pending + piece
                if _may_become_command(start):
                    self._pending = start
                    continue
                stripped = start.lstrip(" \t")
                out.append(QUOTE + start if stripped.startswith(COMMAND_PREFIXES) else start)
                self._pending, self._at_line_start = "", False
            else:
                out.append(piece)
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
        """Write out a held line start (the end of output: it can no longer grow)."""
        if self._pending:
            pending, self._pending = self._pending, ""
            self._at_line_start = False
            self._emit(pending)

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
