"""gate.report.fit: the report within a size budget by whole sections and whole hunks; sections
go in the order of gate.report.view.DROPPABLE across every run, then the checks table shrinks;
hunk bodies are shortened only when that keeps more hunks."""

from __future__ import annotations

import re

import pytest
from support import factories as f

from gate.core.errors import GateError
from gate.judge.verdict import Outcome
from gate.report.chart import chart_series
from gate.report.fit import Document, fit, fit_hunks, fit_prefix, share_room, shrink_sections
from gate.report.render import document
from gate.report.template import render, render_hunk
from gate.report.view import DROPPABLE, RunInput, hunk_view


def full_run(label: str | None = None) -> RunInput:
    head, base = f.sweep_results("head", f.REGRESSED), f.sweep_results("base", f.HEALTHY)
    passing = [f.check(f"c{i}", f"passing check {i}", 1.0, 1.0) for i in range(30)]
    verdict = f.verdict(checks=[*f.verdict().checks, *passing], warnings=["w " * 100],
                        errors=["e " * 100])
    return RunInput(verdict=verdict, head=head, base=base, label=label,
                    chart_series=chart_series(head, base))


def doc_of(*runs: RunInput) -> Document:
    return document(list(runs), 65_536)


def dropped(doc: Document, i: int = 0) -> set[str]:
    return set(DROPPABLE) - doc.runs[i].shown


def shrink_one_char_at_a_time(doc: Document):
    """Every state shrink_sections passes through, budget one character under the last."""
    while True:
        try:
            doc = shrink_sections(doc, len(render(doc)) - 1)
        except GateError:
            return
        yield doc


def test_a_document_that_fits_is_left_whole():
    doc = doc_of(full_run())
    assert shrink_sections(doc, len(render(doc))) == doc


def test_sections_go_first_to_go_first_then_the_checks_shrink():
    states = list(shrink_one_char_at_a_time(doc_of(full_run())))
    for doc in states:
        gone = dropped(doc)
        assert gone == set(DROPPABLE[:len(gone)]), gone  # always a prefix of DROPPABLE
        if doc.runs[0].checks_hidden or doc.runs[0].checks_collapsed:
            assert gone == set(DROPPABLE)  # the checks shrink only once every section went
    passing = sum(c.outcome == Outcome.PASS for c in full_run().verdict.checks)
    hidden = next(d.runs[0] for d in states if d.runs[0].checks_hidden)
    assert hidden.checks_hidden == passing and all(c.outcome != Outcome.PASS for c in hidden.checks)
    assert states[-1].runs[0].checks_collapsed and states[-1].runs[0].checks == []


def test_in_a_matrix_a_section_goes_from_every_run_before_the_next_section():
    for doc in shrink_one_char_at_a_time(doc_of(full_run("a100"), full_run("h100"))):
        for j, name in enumerate(DROPPABLE):
            if any(name not in run.shown for run in doc.runs):
                assert all(not (set(DROPPABLE[:j]) & run.shown) for run in doc.runs), name
        if not any(run.shown for run in doc.runs):
            break  # every section went; the checks are another test's
    assert not any(run.shown for run in doc.runs)


def test_a_budget_not_even_the_shortest_report_fits_is_an_error():
    with pytest.raises(GateError, match="even the shortest report is .* characters, over 100"):
        shrink_sections(doc_of(full_run()), 100)


def hunks(n: int, lines: int = 20, first_lines: int | None = None):
    out = []
    for i in range(n):
        count = first_lines if i == 0 and first_lines else lines
        out.append(f.hunk(f"vllm/v1/sample/m{i}.py", "\n".join(f"+line {j}" for j in range(count))))
    return out


def block_sizes(hs) -> list[int]:
    return [len(render_hunk(hunk_view(h, h.text, 0, first=i == 0))) + 1 for i, h in enumerate(hs)]


def test_the_longest_prefix_of_whole_hunks_that_fits_the_room():
    hs = hunks(3)
    sizes = block_sizes(hs)
    fitted = fit_prefix(hs, None, sizes[0] + sizes[1])
    assert len(fitted.blocks) == 2 and fitted.size == sizes[0] + sizes[1] and fitted.truncated == 0
    assert len(fit_prefix(hs, None, sizes[0] + sizes[1] - 1).blocks) == 1
    assert fit_prefix(hs, None, sizes[0] - 1).blocks == []


def test_bodies_are_shortened_only_when_that_keeps_more_hunks():
    whole = hunks(3)
    fitted = fit_hunks(whole, sum(block_sizes(whole)))
    assert len(fitted.blocks) == 3 and fitted.truncated == 0
    giant_first = hunks(3, first_lines=2000)  # ~16,000 characters of body
    fitted = fit_hunks(giant_first, 6000)
    assert len(fitted.blocks) == 3 and fitted.truncated == 1
    assert "more line(s) of this hunk left out" in fitted.blocks[0]


def test_room_a_run_leaves_unused_goes_to_the_runs_that_left_hunks_out():
    small, big = f.hunkset(hunks(1)), f.hunkset(hunks(40))
    room = 2 * sum(block_sizes(small.hunks)) + sum(block_sizes(big.hunks[:30]))
    alone = fit_hunks(big.hunks, room // 2)
    shared = share_room({0: small, 1: big}, room)
    assert len(shared[0].blocks) == 1
    assert len(shared[1].blocks) > len(alone.blocks)
    assert shared[0].size + shared[1].size <= room


@pytest.mark.parametrize("budget", [12_000, 20_000, 40_000])
def test_fit_never_goes_over_the_budget_and_shows_whole_hunks_only(budget):
    run = full_run()
    run = RunInput(verdict=run.verdict, head=run.head, base=run.base,
                   hunks=f.hunkset(hunks(200, lines=40)))
    text = fit(doc_of(run), {0: run.hunks}, budget)
    assert len(text) <= budget
    assert text.count("<details") == text.count("</details>")  # every block is whole
    left_out = int(re.search(r"(\d+) of 200 hunk\(s\) were left out", text).group(1))
    assert text.count("📄 <code>vllm/v1/sample/m") == 200 - left_out > 0
