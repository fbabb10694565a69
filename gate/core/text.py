"""Plain-text helpers every stage may use: untrusted text on one bounded line, with
bidirectional-text controls shown instead of obeyed. Markdown escaping is gate.report.escape's."""

from __future__ import annotations

import re

_WS = re.compile(r"\s+")
CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# U+061C, U+200E/200F, U+202A-202E, U+2066-2069: they reorder the text around them.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def reveal_bidi(text: str) -> str:
    """Show bidirectional-text controls as `<U+XXXX>` instead of letting them reorder text."""
    return _BIDI.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


def one_line(text: str, limit: int) -> str:
    """`text` on one line (whitespace runs folded, control characters dropped), at most
    `limit` characters, an ellipsis marking a cut."""
    text = _WS.sub(" ", CONTROL_CHARS.sub("", reveal_bidi(str(text)))).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
