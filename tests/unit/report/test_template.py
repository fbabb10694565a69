"""gate.report.template: the Jinja2 environment of the comment. Every plain value it prints is
escaped for markdown; only `Markup` (figures the gate formatted) passes as it is; a name the
template does not know is an error, never an empty string; templates cannot reach Python."""

from __future__ import annotations

import jinja2
import pytest
from markupsafe import Markup
from support import factories as f

from gate.judge.verdict import Outcome
from gate.report.escape import ZWJ
from gate.report.render import document
from gate.report.template import environment, render, render_hunk
from gate.report.view import RunInput, hunk_view


def show(source: str, **values) -> str:
    return environment().from_string(source).render(**values)


def test_a_plain_value_is_escaped_for_markdown():
    out = show("{{ v }}", v="<img src=x> **bold** @octocat fixes #12\nsecond line")
    assert out == (f"&lt;img src=x&gt; \\*\\*bold\\*\\* @{ZWJ}octocat fixes #{ZWJ}12 "
                   "second line")


def test_markup_and_numbers_print_as_they_are():
    assert show("{{ v }}", v=Markup("**1.5×**")) == "**1.5×**"
    assert show("{{ a }} {{ b }}", a=3, b=2.5) == "3 2.5"


def test_a_bool_is_text_like_any_other_untrusted_value():
    assert show("{{ v }}", v=True) == "True"


def test_a_long_value_is_cut_at_the_default_or_the_given_limit():
    assert len(show("{{ v }}", v="x" * 5000)) == 600
    assert show("{{ v | inline(5) }}", v="abcdefgh") == "abcd…"


def test_the_html_filter_escapes_for_an_element_and_its_attributes():
    out = show("<code>{{ v | html }}</code>", v='a"b<c>@d')
    assert out == f"<code>a&quot;b&lt;c&gt;@{ZWJ}d</code>"


def test_the_code_filter_fences_longer_than_any_backtick_run_in_the_body():
    out = show("{{ v | code('diff') }}", v="+x = '````'\n+y")
    assert out.startswith("`````diff\n") and out.endswith("\n`````")


def test_outcomes_print_as_their_emoji():
    assert show("{{ o | emoji }}", o=Outcome.FAIL) == "❌"
    assert show("{{ o | outcome }}", o=Outcome.INCONCLUSIVE) == "⚠️ inconclusive"


def test_an_unknown_name_is_an_error_not_an_empty_string():
    with pytest.raises(jinja2.UndefinedError):
        show("{{ run.no_such_field }}", run=object())


def test_a_template_cannot_reach_python_internals():
    with pytest.raises(jinja2.exceptions.SecurityError):
        show("{{ v.__class__.__mro__ }}", v="x")


def test_a_hunk_renders_as_a_collapsible_block_with_its_path_escaped():
    h = f.hunk("vllm/v1/<b>x</b>.py", "+a = '@octocat'", mechanisms=["pin_memory"], score=4.0)
    block = render_hunk(hunk_view(h, h.text, 0, first=True))
    assert isinstance(block, Markup)
    assert block.startswith("<details open><summary>🔥 <code>vllm/v1/&lt;b&gt;x&lt;/b&gt;.py")
    assert "<b>pin_memory</b> (score 4.0)" in block
    assert "```diff\n+a = '@octocat'\n```" in block  # code is shown as written
    assert block.rstrip().endswith("</details>")


def test_the_document_is_the_template_over_a_documents_runs():
    verdict = f.verdict(Outcome.FAIL, headline="@team drain **48%** slower")
    text = render(document([RunInput(verdict=verdict)], 65_536))
    assert text.startswith(f"### ❌ FAIL: @{ZWJ}team drain \\*\\*48%\\*\\* slower")


def test_a_dollar_sign_cannot_open_math():
    """Security review L8: GitHub renders $...$ (and $$...$$) as math in comments; an escaped
    `\\$` is a dollar sign."""
    assert show("{{ v }}", v="cost $x^2$ and $$\\frac{a}{b}$$") == (
        "cost \\$x^2\\$ and \\$\\$\\\\frac{a}{b}\\$\\$")
