"""The Jinja2 environment that renders gate/report/templates/comment.md.j2 with every untrusted value
escaped.

Jinja2's own autoescaping HTML-escapes; markdown needs more (no markup, no @mentions, no
#refs), so `finalize` runs every printed value that is not `Markup` through
gate.report.escape.md_inline, and the filters `inline`, `html` and `code` escape for the other
places a value can go (a length-limited cell, an HTML element, a fenced block). Python marks a
value `Markup` only when the gate formatted it from numbers or escaped it already; macros
return `Markup` (their insides were escaped as they were printed).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import PackageLoader, StrictUndefined
from jinja2.sandbox import SandboxedEnvironment
from markupsafe import Markup

from gate.judge.verdict import Outcome
from gate.report.escape import code_block, html_text, md_inline

TEMPLATE = "comment.md.j2"
DEFAULT_INLINE_LIMIT = 600
EMOJI = {Outcome.PASS: "✅", Outcome.FAIL: "❌", Outcome.INCONCLUSIVE: "⚠️", Outcome.UNDECIDED: "⏸️",
         Outcome.ERROR: "💥"}


def escape_value(value: Any) -> Markup:
    """`finalize`: what every `{{ value }}` prints."""
    if isinstance(value, Markup):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Markup(str(value))
    return Markup(md_inline(str(value), DEFAULT_INLINE_LIMIT))


def inline(value: Any, limit: int = DEFAULT_INLINE_LIMIT) -> Markup:
    return value if isinstance(value, Markup) else Markup(md_inline(str(value), limit))


def html(value: Any, limit: int = 200) -> Markup:
    return Markup(html_text(str(value), limit))


def code(value: Any, info: str = "") -> Markup:
    return Markup(code_block(str(value), info))


def emoji(outcome: Outcome) -> Markup:
    return Markup(EMOJI[outcome])


def outcome_cell(outcome: Outcome) -> Markup:
    return Markup(f"{EMOJI[outcome]} {outcome.value}")


@cache
def environment() -> SandboxedEnvironment:
    env = SandboxedEnvironment(
        loader=PackageLoader("gate.report", "templates"),
        autoescape=True,  # macros return Markup; `finalize` does the escaping
        finalize=escape_value,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(inline=inline, html=html, code=code, emoji=emoji, outcome=outcome_cell)
    return env


def render(doc: Any) -> str:
    """The whole document for `doc` (a gate.report.fit.Document)."""
    return environment().get_template(TEMPLATE).render(doc=doc)


def render_hunk(hunk: Any) -> Markup:
    """One hunk's collapsible block (the template's `hunk` macro), to measure and place."""
    return Markup(_macros().hunk(hunk))


@cache
def _macros() -> Any:
    return environment().get_template(TEMPLATE).module
