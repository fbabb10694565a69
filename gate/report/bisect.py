"""The markdown report of `gate bisect` (bisect.md, the job summary, an issue): laid out by
templates/bisect.md.j2 in the gate's Jinja2 environment (gate.report.template), so every
untrusted string (commit subjects, reasons, paths, hunk bodies) is escaped for its place.
Pure: results in, markdown out."""

from __future__ import annotations

import re
from dataclasses import dataclass

from markupsafe import Markup

from gate.evidence.bisect_record import BisectResult, HunksResult, Measured
from gate.evidence.bisection import Effect
from gate.evidence.hunks import Hunk
from gate.report.escape import truncate_lines
from gate.report.render import GITHUB_COMMENT_LIMIT
from gate.report.template import environment

TEMPLATE = "bisect.md.j2"
MAX_HUNKS = 10  # shown in full; hunks.json has them all
MAX_HUNK_CHARS = 4000
OUTCOME_EMOJI = {"found": "🎯", "no_regression": "✅", "inconclusive": "⚠️",
                 "uncalibrated": "⚠️", "undecided": "⚠️", "not_reproduced": "⚠️", "error": "💥"}


def percent(value: float | None) -> Markup:
    return Markup("-" if value is None else f"{value:+.1f}%")


def effect_cells(effect: Effect | None) -> dict[str, Markup | str]:
    if effect is None:
        return {"check": "-", "delta": Markup("-"), "interval": Markup("-")}
    interval = Markup("-") if effect.ci_low_pct is None else Markup(
        f"{'range ' if effect.interval_is_range else ''}"
        f"{percent(effect.ci_low_pct)} .. {percent(effect.ci_high_pct)}")
    return {"check": effect.label, "delta": percent(effect.delta_pct), "interval": interval}


def minutes(seconds: float) -> Markup:
    return Markup(f"{seconds / 60:.1f}")


def row(m: Measured) -> dict:
    outcome = (m.outcome.value if m.outcome else
               "screened: no gross slowdown" if m.screened else "not measured")
    return {**effect_cells(m.effect), "outcome": outcome, "rounds": Markup(str(m.rounds)),
            "minutes": minutes(m.seconds), "build": m.build or "-", "reason": m.reason}


@dataclass(frozen=True, kw_only=True)
class BisectHunk:
    """One hunk as the bisect's report shows it (the PR comment's is view.HunkView)."""

    path: str
    where: Markup
    section: str
    evidence: str | None
    text: str
    cut: int


def bisect_hunk(h: Hunk) -> BisectHunk:
    text, cut = truncate_lines(h.text, MAX_HUNK_CHARS)
    return BisectHunk(path=h.path, where=Markup(f":{h.new_start}" if h.new_start else ""),
                      section=h.section, evidence=h.evidence, text=text, cut=cut)


def render_bisect(result: BisectResult, limit: int = GITHUB_COMMENT_LIMIT) -> str:
    """The report, within `limit` characters (an issue comment's): the hunks shown in full
    give way first, lowest ranked first; hunks.json keeps them all."""
    shown = MAX_HUNKS
    while True:
        text = _render_bisect(result, shown)
        if len(text) <= limit or shown == 0:
            return cut_to(text, limit)
        shown -= 1


CUT_NOTE = "\n\n(The report was cut here to fit; bisect.json has all of it.)\n"


def cut_to(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut at a line end, a code fence left open by the cut
    closed: what follows the cut is a note, never the rest of a hunk's fence."""
    room = limit - len(CUT_NOTE)
    while len(text) > limit:
        kept, _ = truncate_lines(text, room)
        fence = _open_fence(kept)
        cut = kept + (f"\n{fence}" if fence else "") + CUT_NOTE
        if len(cut) <= limit:
            return cut
        room -= len(cut) - limit
    return text


def _open_fence(text: str) -> str | None:
    """The backtick fence still open at the end of `text` (CommonMark: a closing fence is at
    least as long as its opening one), or None."""
    fence = None
    for line in text.split("\n"):
        run = re.match(r" {0,3}(`{3,})", line)
        if run is None:
            continue
        if fence is None:
            fence = run.group(1)
        elif len(run.group(1)) >= len(fence) and line.strip() == run.group(1):
            fence = None
    return fence


def _render_bisect(result: BisectResult, shown: int) -> str:
    subjects = {c.sha: c.subject for c in [result.good, result.bad, *result.candidates,
                                           *result.skipped]}
    steps = [{**row(s), "number": Markup(str(s.number)), "sha": s.commit[:12],
              "subject": s.subject or subjects.get(s.commit) or _subject(result, s.commit),
              "verdict": s.verdict.value, "role": s.role} for s in result.steps]
    hunks = result.hunks.hunks if result.hunks else []
    return environment().get_template(TEMPLATE).render(
        kind="commits", r=result, emoji=Markup(OUTCOME_EMOJI[result.outcome.value]),
        steps=steps, hunks=[bisect_hunk(h) for h in hunks[:shown]],
        smallest=[bisect_hunk(h) for h in result.smallest_hunks],
        hunks_left=Markup(str(max(len(hunks) - shown, 0))),
        total=minutes(result.runner_seconds),
        step_minutes=minutes(sum(s.seconds for s in result.steps)))


def _subject(result: BisectResult, sha: str) -> str:
    if result.first_bad and result.first_bad.sha == sha:
        return result.first_bad.subject
    return ""


def render_hunks(result: HunksResult) -> str:
    tests = [{**row(t), "number": Markup(str(t.number)),
              "hunks": Markup(", ".join(str(i + 1) for i in t.hunks)),
              "reproduces": "yes" if t.reproduces else "no"} for t in result.tests]
    minimal = [bisect_hunk(result.hunks[i]) for i in result.minimal]
    return environment().get_template(TEMPLATE).render(
        kind="hunks", r=result, emoji=Markup(OUTCOME_EMOJI[result.outcome.value]),
        tests=tests, minimal=minimal, numbers=[Markup(str(i + 1)) for i in result.minimal],
        all_hunks=[bisect_hunk(h) for h in result.hunks],
        total=minutes(result.runner_seconds),
        step_minutes=minutes(sum(t.seconds for t in result.tests)))


def _terminal_row(m: Measured) -> list[str]:
    r = row(m)
    return [str(r["outcome"]), str(r["check"]), str(r["delta"]), str(r["interval"]),
            str(r["rounds"]), str(r["minutes"])]


def terminal_bisect(result: BisectResult) -> str:
    """The headline, one row per step and the runner time, for the terminal."""
    from tabulate import tabulate  # here: the poster job renders bisect.md without it
    rows = [[str(s.number), s.commit[:12], s.verdict.value + (" (endpoints)" if
             s.role == "endpoints" else ""), *_terminal_row(s), s.reason[:80]]
            for s in result.steps]
    table = tabulate(rows, headers=["#", "commit", "verdict", "A/B", "check", "delta",
                                    "interval", "rounds", "runner min", "why skipped"],
                     disable_numparse=True)
    lines = [result.headline, "", table, "",
             f"runner time: {result.runner_seconds / 60:.1f} min in all"]
    if result.hunks and result.hunks.hunks:
        top = result.hunks.hunks[0]
        lines.append(f"top hunk: {top.path}:{top.new_start} {top.evidence or ''}".rstrip())
    if result.smallest_hunks_headline:
        lines.append(f"hunks: {result.smallest_hunks_headline}")
    return "\n".join(lines + [f"note: {n}" for n in result.notes])


def terminal_hunks(result: HunksResult) -> str:
    from tabulate import tabulate  # here: the poster job renders reports without it
    rows = [[str(t.number), ",".join(str(i + 1) for i in t.hunks),
             "yes" if t.reproduces else "no", *_terminal_row(t), t.reason[:80]]
            for t in result.tests]
    table = tabulate(rows, headers=["#", "hunks", "reproduces", "A/B", "check", "delta",
                                    "interval", "rounds", "runner min", "why unresolved"],
                     disable_numparse=True)
    hunks = [f"  {i + 1}. {h.path}:{h.new_start} {h.section}".rstrip()
             for i, h in enumerate(result.hunks)]
    return "\n".join([result.headline, "", "hunks:", *hunks, "", table, "",
                      f"runner time: {result.runner_seconds / 60:.1f} min in all"]
                     + [f"note: {n}" for n in result.notes])
