"""The hunks a PR comment (or a report, or a job summary: the same document) shows, in the order
it shows them: the `<details>` blocks of its "Changes in watched paths" section
(gate/report/templates/comment.md.j2, macro `hunk`). The sections above it name files too (the
profile table, "Hunks with measured added time"), so a file's first mention in the body is
not its hunk's rank."""

from __future__ import annotations

import re
from dataclasses import dataclass

HUNKS_HEADING = "#### Changes in watched paths"
# <details open><summary>🔥 <code>PATH</code> L12–18 · <code>def f(</code> · ⏱️ <b>...</b></summary>
_HUNK = re.compile(r"<details(?: open)?><summary>(?:🔥|📄) <code>([^<]*)</code>(.*?)</summary>")


@dataclass(frozen=True)
class ShownHunk:
    path: str
    summary: str  # the rest of its summary line: lines, section, evidence, mechanisms


def shown_hunks(body: str) -> list[ShownHunk]:
    """The hunks of the section, first ranked first; [] when the body has no such section."""
    _, heading, section = body.partition(HUNKS_HEADING)
    if not heading:
        return []
    section = section.split("\n#### ", 1)[0]
    return [ShownHunk(path, rest) for path, rest in _HUNK.findall(section)]
