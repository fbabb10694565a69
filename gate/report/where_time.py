"""The comment's "Where the head spends more time" section (markdown, short).

Pure: a ProfileDiff (and, when the PR's hunks were ranked against it, the Evidence) in,
markdown out. Every string that comes from a profile or a diff (function names, paths, hunk
headers) is untrusted and goes through gate.report.escape.
"""

from __future__ import annotations

from gate.evidence.attribution import Evidence, signed_ms
from gate.profile.diff_file import UNIT, FunctionDiff, ProfileDiff
from gate.report.escape import md_inline

TITLE = "#### Where the head spends more time"


def _row(f: FunctionDiff) -> str:
    self_, incl = f.self_time, f.inclusive
    if self_.significant and self_.diff > 0:
        c, kind = self_, "self"
    else:
        c, kind = incl, "incl."
    name = md_inline(f.name, 80)
    where = md_inline(f.where, 100)
    return (f"| {name} | {where} | {c.base:.1f} | {c.head:.1f} | "
            f"**{signed_ms(c.diff)}** {kind} |")


def _hunk_lines(evidence: Evidence, limit: int) -> list[str]:
    lines = []
    for h in [h for h in evidence.hunks if h.evidence][:limit]:
        where = md_inline(f"{h.path}:{h.new_start or h.old_start}", 120)
        section = f" ({md_inline(h.section, 60)})" if h.section else ""
        lines.append(f"{h.rank}. {where}{section}: {md_inline(h.evidence or '', 200)}")
    return lines


def render_where_time(diff: ProfileDiff, evidence: Evidence | None = None,
                      limit: int = 5) -> str:
    """The section: the top `limit` functions with added self time beyond noise (or, when
    none has, added inclusive time), the hunks they point at, and the added time that no
    hunk touches. Callers whose inclusive time grew only through those functions are left to
    profile-diff.json: every caller of a slowed function grows by the same amount."""
    out = [TITLE, ""]
    added = diff.added
    windows = f"{diff.base_windows} + {diff.head_windows} sampling windows"
    if not added:
        floors = diff.settings
        out.append(f"No function takes more time beyond noise ({windows}; "
                   f"total {diff.total.base:.0f} -> {diff.total.head:.0f} {UNIT}). Named "
                   f"would be a difference beyond sampling noise and at least "
                   f"{floors.min_share:.0%} of the base's time and {floors.min_rel:.0%} of the "
                   "function's own: smaller ones are within what two servers of one build "
                   "differ by.")
        return "\n".join(out) + "\n"
    own = [f for f in added if f.self_time.significant and f.self_time.diff > 0]
    rows = own or added
    out += [f"py-spy samples, {UNIT} ({windows}; beyond noise only; self = in the function "
            "itself, incl. = with what it calls).", "",
            "| function | file:line | base | head | change |", "|---|---|--:|--:|--:|"]
    out += [_row(f) for f in rows[:limit]]
    if len(added) > min(limit, len(rows)):
        out.append(f"\n{len(added) - min(limit, len(rows))} more (callers included) in "
                   "profile-diff.json.")
    if evidence is not None:
        out += _evidence_lines(evidence)
    return "\n".join(out) + "\n"


def _evidence_lines(evidence: Evidence) -> list[str]:
    out = []
    hunk_lines = _hunk_lines(evidence, 3)
    if hunk_lines:
        out += ["", "Hunks with measured added time:", *hunk_lines]
    if evidence.untouched:
        names = ", ".join(md_inline(f"{f.name} ({signed_ms(f.self_diff or 0)})", 100)
                          for f in evidence.untouched[:3])
        out += ["", f"Added time that no hunk touches (a dependency or a caller changed): "
                    f"{names}."]
    return out
