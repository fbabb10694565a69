"""Rendering untrusted text (diff hunks, paths, model output, log lines, error strings) into
GitHub markdown so that it cannot break out of its block, inject HTML, or ping anyone.

- code: fenced with a backtick fence longer than any backtick run in the body, so no body
  line can close it; GitHub does not resolve @mentions or #refs inside code.
- inline (table cells, list items): one line, HTML-escaped, markdown punctuation
  backslash-escaped, mentions and issue refs neutralised.
- HTML (inside <summary>): one line, HTML-escaped, mentions and refs neutralised.

Everywhere, including code: bidirectional-text controls (the "Trojan Source" characters) are
shown as a visible `<U+202E>` instead of reordering what a reviewer reads, and full issue / PR
URLs lose their auto-link (a zero-width joiner before the number), so that no untrusted text
makes GitHub add a cross-reference to another issue.

Outside code, no untrusted text becomes a link: GitHub's autolink extension turns bare
`https://...`, `www....` and `name@host` into links, so a zero-width joiner goes after the
scheme's colon, after `www` and after `@` (GitHub links none of them then; the text reads the
same). Links written as markdown or HTML are already escaped away.
"""

from __future__ import annotations

import html
import re

from gate.core.text import CONTROL_CHARS, one_line, reveal_bidi

ZWJ = "\u200d"  # zero-width joiner: '@\u200dname' renders as '@name' but pings nobody
_MENTION = re.compile(r"@(?=[A-Za-z0-9_\[-])")
_ISSUE_REF = re.compile(r"#(?=\d)")
_GH_REF = re.compile(r"\b(GH)-(?=\d)", re.IGNORECASE)
# Markdown punctuation that matters mid-line (`$`: GitHub renders $...$ as math); `_` only at
# a word edge (OMP_NUM_THREADS stays readable: GFM never emphasises intraword underscores);
# '(' is harmless once '[' is escaped.
_MD_SPECIAL = re.compile(r"([\\`*\[\]|~<>$]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
_LEADING_BLOCK = re.compile(r"^(\d*)([-+#=.)])")  # list items, headings, '1.' lists
_BACKTICKS = re.compile(r"`+")
_URL_SCHEME = re.compile(r"(?<=[A-Za-z]):(?=//)")  # https://, ftp://, any scheme://
_WWW = re.compile(r"\b(www)(?=\.)", re.IGNORECASE)
# https://github.com/o/r/issues/1, /pull/1, /discussions/1 (any host: GHES too).
_ISSUE_URL = re.compile(
    r"(https?://[^\s/<>]+/[^\s/<>]+/[^\s/<>]+/(?:issues|pull|pulls|discussions)/)(?=\d)",
    re.IGNORECASE,
)


def unlink_issue_urls(text: str) -> str:
    """A zero-width joiner before the number of a full issue/PR URL: no auto-link, no backref."""
    return _ISSUE_URL.sub(r"\1" + ZWJ, text)


def break_autolinks(text: str) -> str:
    """No bare URL or `www.` becomes a link: a zero-width joiner after `scheme:` and `www`
    (e-mail addresses lose theirs at the `@`, in `neutralize`)."""
    return _WWW.sub(r"\1" + ZWJ, _URL_SCHEME.sub(":" + ZWJ, text))


def neutralize(text: str) -> str:
    """Stop @mentions (and e-mail links), #123, GH-123, issue-URL cross-references and
    autolinks: a zero-width joiner after @ / # / GH-, before the number of an issue URL, after
    a URL's scheme and after `www`."""
    text = unlink_issue_urls(_MENTION.sub("@" + ZWJ, text))
    text = _ISSUE_REF.sub("#" + ZWJ, text)
    text = _GH_REF.sub(lambda m: m.group(1) + "-" + ZWJ, text)
    return break_autolinks(text)


def md_inline(text: str, limit: int = 300) -> str:
    """Untrusted text for a table cell or a list item: no HTML, no markup, no pings."""
    escaped = _MD_SPECIAL.sub(r"\\\1", html.escape(one_line(text, limit), quote=False))
    escaped = _LEADING_BLOCK.sub(r"\1\\\2", escaped)
    return neutralize(escaped)


def html_text(text: str, limit: int = 200) -> str:
    """Untrusted text inside an HTML element such as <summary> or <code>. Brackets become
    character references: inside a paragraph GitHub still reads markdown between inline tags,
    and `[text](url)` there would be a link."""
    escaped = neutralize(html.escape(one_line(text, limit), quote=True))
    # after neutralize, which would otherwise break the references' `&#9` like an issue ref
    return escaped.replace("[", "&#91;").replace("]", "&#93;")


def fence_for(body: str) -> str:
    longest = max((len(m) for m in _BACKTICKS.findall(body)), default=0)
    return "`" * max(3, longest + 1)


def code_block(body: str, info: str = "") -> str:
    """A fenced code block that no line of `body` can close. GitHub resolves no @mention
    inside code, but it does show bidi controls and may cross-reference issue URLs."""
    body = CONTROL_CHARS.sub("\ufffd", body.replace("\r\n", "\n")).replace("\r", "\n")
    body = unlink_issue_urls(reveal_bidi(body))
    fence = fence_for(body)
    return f"{fence}{info}\n{body}\n{fence}"


def truncate_lines(body: str, max_chars: int) -> tuple[str, int]:
    """Cut `body` to at most `max_chars` at a line boundary; return it and the lines cut."""
    if len(body) <= max_chars:
        return body, 0
    lines = body.split("\n")
    kept, size = [], 0
    for line in lines:
        if size + len(line) + 1 > max_chars:
            break
        kept.append(line)
        size += len(line) + 1
    if not kept:  # one very long line
        kept = [lines[0][:max_chars]]
    return "\n".join(kept), len(lines) - len(kept)
