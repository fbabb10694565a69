"""Progress lines: elapsed time first; transient updates throttled in a log; quiet is silent."""

from __future__ import annotations

import io
import re

from gate.core.progress import Progress


def test_every_line_starts_with_the_elapsed_time():
    out = io.StringIO()
    progress = Progress(out)
    progress("server healthy after 41.2 s")
    assert re.fullmatch(r"\[ *\d+\.\ds\] server healthy after 41.2 s\n", out.getvalue())


def test_updates_in_a_log_are_throttled_and_quiet_prints_nothing():
    out = io.StringIO()
    progress = Progress(out)
    progress.update("12/48 requests")
    progress.update("13/48 requests")  # within 10 s of the last: dropped in a log
    assert out.getvalue().count("requests") == 1 and "... 12/48" in out.getvalue()
    quiet = io.StringIO()
    Progress(quiet, quiet=True)("anything")
    assert quiet.getvalue() == ""


def test_a_terminal_rewrites_the_update_line_and_closes_it_before_a_message():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    progress = Progress(out)
    progress.update("cell 1")
    progress("done")
    text = out.getvalue()
    assert text.startswith("\r[") and "\033[K\n[" in text and text.endswith("done\n")
