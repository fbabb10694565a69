"""The first line of an error verdict names the cause, not its consequences: when one side's
server died, the headline says which build died and why (the last error line of its log)
before "head results hold no measured cells" and the like.

A side's run errors (what broke while it was measured: its server exited, never became
healthy, died during a cell) are the causes; the integrity errors of either side that follow
from them (no measured cells, failed requests) come after them, in their own order.
"""

from __future__ import annotations

import re

from gate.core.text import one_line

# How gate.judge.run_validity writes a side's run error: "base run error: ...".
RUN_ERROR = " run error: "
# What gate.measure says when a server is gone.
_DEATH = re.compile(r"exited with code|not healthy after|the server died|never started")
# What gate.measure.server says when vLLM's own configuration check stopped the server at
# start-up: the build's answer to the plan, not a crash.
REFUSED = "this build refuses the plan: "
_LOG_TAIL = "; last lines of "
# A line of a server log that says what went wrong (a traceback's last line, a kill).
_ERROR_LINE = re.compile(r"(?:Error|Exception|error:|Killed|Aborted|Segmentation fault|"
                         r"No such file|not found|denied|out of memory)", re.IGNORECASE)
HEADLINE_LIMIT = 400


def is_cause(error: str) -> bool:
    """A side's own run error (written `WHO run error: ...`)."""
    who, sep, _ = error.partition(RUN_ERROR)
    return bool(sep) and " " not in who


def causes_first(errors: list[str]) -> list[str]:
    """The run errors first, the rest after them; each group in its own order."""
    return [e for e in errors if is_cause(e)] + [e for e in errors if not is_cause(e)]


def log_cause(tail: str) -> str:
    """The line of a log tail that says what went wrong: its last error-looking line, or its
    last line."""
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    return next((ln for ln in reversed(lines) if _ERROR_LINE.search(ln)),
                lines[-1] if lines else "")


def condensed(error: str) -> str:
    """One line of `error`: its first line and, when it carries a server log's last lines,
    the one of them that says what went wrong."""
    first, _, rest = error.partition("\n")
    if _LOG_TAIL not in first:
        return one_line(first, HEADLINE_LIMIT)
    said = first.split(_LOG_TAIL)[0]
    if REFUSED in said:  # vLLM's own reason is said already: its log's lines add nothing
        return one_line(said, HEADLINE_LIMIT)
    cause = log_cause(rest)
    return one_line(f"{said}; its log ends: {cause}" if cause else said, HEADLINE_LIMIT)


def cause_line(errors: list[str]) -> str | None:
    """'the base build's server died: vllm serve exited with code 1 before it became healthy;
    its log ends: RuntimeError: ...' when the first error is a server's death ('the head
    build refuses the plan: <vLLM's reason> (...)' when vLLM's configuration check stopped
    it); None otherwise."""
    if not errors or not is_cause(errors[0]):
        return None
    who, _, what = errors[0].partition(RUN_ERROR)
    first = what.partition("\n")[0]
    if not _DEATH.search(first):
        return None
    what = what.removeprefix(f"{who}: ")  # the flows name the side too
    if REFUSED in first:
        return one_line(f"the {who} build refuses the plan: "
                        f"{condensed(what).partition(REFUSED)[2]}", HEADLINE_LIMIT)
    return f"the {who} build's server died: {condensed(what)}"
