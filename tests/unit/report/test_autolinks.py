"""No untrusted text becomes a link in the bot's comment (issue 16, item 9): GitHub's renderer
(cmark-gfm, through support/markdown_check.github_links) autolinks bare `https://...`,
`www....` and e-mail addresses, so the gate's escaping must break them wherever untrusted text
lands outside code; inside code nothing is linked and the text stays as it was."""

from __future__ import annotations

import pytest
from support import factories as f
from support import markdown_check

from gate.judge.verdict import Outcome
from gate.report.escape import html_text, md_inline
from gate.report.render import ReportInput, render_report

LURES = [
    "see https://evil.example/login for the fix",
    "HTTPS://EVIL.example/x",
    "www.evil.example/x",
    "(www.evil.example)",
    "mail root@evil.example now",
    "mailto:root@evil.example",
    "ftp://evil.example/f",
    "[click](https://evil.example)",
    "<https://evil.example>",
]


@pytest.mark.parametrize("text", LURES)
def test_escaped_text_makes_no_link(text):
    assert markdown_check.github_links(text), "the lure itself is a link on GitHub"
    contexts = [
        md_inline(text),
        f"| a | {md_inline(text)} |",
        f"- {md_inline(text)}",
        f"merge-base <code>{html_text(text)}</code> and more",  # inline HTML in a paragraph
        f"<details><summary><code>{html_text(text)}</code></summary>\n\nbody\n</details>",
    ]
    for escaped in contexts:
        assert markdown_check.github_links(escaped) == [], escaped


def test_a_report_full_of_lures_links_only_what_the_gate_links(tmp_path):
    lure = " ".join(LURES)
    hunks = f.hunkset([f.hunk(path="vllm/v1/sample/www.evil.example.py",
                              text="+# docs at https://evil.example/docs", section=lure)])
    verdict = f.verdict(Outcome.FAIL, headline=f"FAIL: {lure}", errors=[lure], advice=[lure])
    head = f.sweep_results("head", f.REGRESSED, errors=[lure])
    clean = render_report(ReportInput(verdict=f.verdict(Outcome.FAIL), head=f.sweep_results(
        "head", f.REGRESSED), hunks=f.hunkset([f.hunk()])))
    md = render_report(ReportInput(verdict=verdict, head=head, hunks=hunks))
    links = markdown_check.github_links(md)
    assert not [href for href in links if "evil" in href.lower()], links
    assert sorted(links) == sorted(markdown_check.github_links(clean))
    shown = markdown_check.render(md)
    assert "+# docs at https://evil.example/docs" in "".join(shown.code)  # code keeps its text


def test_brackets_in_html_text_render_as_brackets_and_refs_stay_dead():
    """A hunk's section header such as `Callable[[str], _T]` reads as written on GitHub."""
    shown = markdown_check.render(f"<code>{html_text('Callable[[str], _T] fixes #12')}</code>")
    code = "".join(shown.code)
    assert code == "Callable[[str], _T] fixes #\u200d12"
    assert shown.live_refs() == []
