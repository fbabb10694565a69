"""Fitting the report into a size budget (GitHub's 65,536-character comment limit), in one
place, by whole sections and whole hunks; no text is ever cut in the middle.

1. Sections go, first to go first (gate.report.view.DROPPABLE, across every run of a matrix
   comment), until the document without hunk bodies fits; as a last resort the checks table
   keeps only the checks that did not pass, then becomes a count.
2. The room left is shared among the runs' hunks: best-ranked hunks first, whole; long hunk
   bodies are shortened at a line boundary only when that keeps more hunks. A note says how
   many hunks were left out and that hunks.json has them all.

The budget covers everything rendered: hidden tags, headings, notes and footer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace

from markupsafe import Markup

from gate.core.errors import GateError
from gate.evidence.hunks import Hunk, HunkSet
from gate.judge.verdict import SEVERITY, Outcome
from gate.report.escape import truncate_lines
from gate.report.template import render, render_hunk
from gate.report.view import DROPPABLE, HunksView, RunView, hunk_view

BODY_CAPS = (None, 4000, 1000)  # hunk body caps tried in turn when hunks must be trimmed
NOTE_MARGIN = 40  # the trim note's counts may grow by a few digits once hunks are placed


@dataclass(frozen=True)
class Frame:
    """The comment's hidden tags and run link (absent from the job-summary report)."""

    marker: Markup
    outcome_tag: Markup
    run_url: Markup | None = None


@dataclass(frozen=True)
class Document:
    runs: list[RunView]
    limit: Markup
    version: Markup
    frame: Frame | None = None

    @property
    def worst(self) -> RunView:
        return min(self.runs, key=lambda r: SEVERITY.index(r.outcome))

    @property
    def outcome(self) -> Outcome:
        return self.worst.outcome

    @property
    def modes(self) -> str:
        return ", ".join(dict.fromkeys(r.mode for r in self.runs))


def with_run(doc: Document, i: int, run: RunView) -> Document:
    return replace(doc, runs=[run if j == i else r for j, r in enumerate(doc.runs)])


# ---- 1. sections -----------------------------------------------------------------------------


def only_failing_checks(run: RunView) -> RunView:
    kept = [c for c in run.checks if c.outcome != Outcome.PASS]
    return replace(run, checks=kept, checks_hidden=len(run.checks) - len(kept))


def collapse_checks(run: RunView) -> RunView:
    return replace(run, checks=[], checks_hidden=0, checks_collapsed=True)


def shrink_steps(doc: Document):
    """(run index, how to make that run's report shorter), in the order they are tried."""
    n = range(len(doc.runs))
    for name in DROPPABLE:
        for i in n:
            yield i, lambda r, name=name: replace(r, shown=r.shown - {name})
    for step in (only_failing_checks, collapse_checks):
        for i in n:
            yield i, step


def shrink_sections(doc: Document, budget: int) -> Document:
    size = len(render(doc))
    for i, step in shrink_steps(doc):
        if size <= budget:
            return doc
        doc = with_run(doc, i, step(doc.runs[i]))
        size = len(render(doc))
    if size > budget:
        raise GateError(f"even the shortest report is {size:,} characters, over {budget:,}")
    return doc


# ---- 2. hunks --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fitted:
    blocks: list[Markup]
    truncated: int
    size: int


def fit_prefix(hunks: list[Hunk], cap: int | None, room: int) -> Fitted:
    """The longest prefix of rendered hunks (bodies capped at `cap`) within `room` chars."""
    blocks, size, truncated = [], 0, 0
    for i, h in enumerate(hunks):
        body, cut = truncate_lines(h.text, cap) if cap else (h.text, 0)
        block = render_hunk(hunk_view(h, body, cut, first=i == 0))
        if size + len(block) + 1 > room:  # +1: the blank line before each block
            break
        blocks.append(block)
        size += len(block) + 1
        truncated += bool(cut)
    return Fitted(blocks, truncated, size)


def fit_hunks(hunks: list[Hunk], room: int) -> Fitted:
    """Whole hunks go from the end first; bodies are capped only when that keeps more hunks."""
    best = Fitted([], 0, 0)
    for cap in BODY_CAPS:
        fitted = fit_prefix(hunks, cap, room)
        if len(fitted.blocks) > len(best.blocks):
            best = fitted
        if len(best.blocks) == len(hunks):
            break
    return best


def share_room(sets: dict[int, HunkSet], room: int) -> dict[int, Fitted]:
    """Equal shares first; what a run did not use goes to the runs that left hunks out."""
    fitted = {i: fit_hunks(hs.hunks, room // len(sets)) for i, hs in sets.items()}
    spare = room - sum(f.size for f in fitted.values())
    for i, hs in sets.items():
        if len(fitted[i].blocks) < len(hs.hunks) and spare > 0:
            more = fit_hunks(hs.hunks, fitted[i].size + spare)
            spare -= more.size - fitted[i].size
            fitted[i] = more
    return fitted


def place(doc: Document, fitted: dict[int, Fitted]) -> Document:
    for i, f in fitted.items():
        hv: HunksView = doc.runs[i].hunks  # type: ignore[assignment]
        doc = with_run(doc, i, replace(doc.runs[i], hunks=replace(
            hv, blocks=f.blocks, truncated=f.truncated)))
    return doc


def drop_last_block(fitted: dict[int, Fitted]) -> dict[int, Fitted]:
    i = max(fitted, key=lambda k: len(fitted[k].blocks))
    f = fitted[i]
    if not f.blocks:
        raise GateError("the report does not fit even without hunks")  # pragma: no cover
    return {**fitted, i: dataclasses.replace(f, blocks=f.blocks[:-1])}


def place_hunks(doc: Document, sets: dict[int, HunkSet], budget: int) -> str:
    """Render `doc` (its hunks left out) with as many hunks as fit in `budget`."""
    text = render(doc)
    sets = {i: hs for i, hs in sets.items() if hs.hunks}
    if not sets:
        return text
    fitted = share_room(sets, budget - len(text) - NOTE_MARGIN)
    text = render(place(doc, fitted))
    while len(text) > budget:  # the estimate was off (a note's digits): one hunk less
        fitted = drop_last_block(fitted)
        text = render(place(doc, fitted))
    return text


def fit(doc: Document, sets: dict[int, HunkSet], budget: int) -> str:
    """The document within `budget` characters. `doc`'s hunk views hold no blocks yet;
    `sets` maps a run's index to its ranked hunks."""
    return place_hunks(shrink_sections(doc, budget), sets, budget)
