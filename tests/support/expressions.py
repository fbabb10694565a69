"""GitHub Actions expressions (`${{ ... }}` and `if:`), evaluated the way GitHub's runner
evaluates them, for the subset the shipped workflows and action.yml use: contexts read by
property path (a missing property is null), string/number/boolean/null literals, `==` and `!=`
(strings compared case-insensitively), `!`, `&&` and `||` (which return an operand, not a
boolean), parentheses, and the functions format(), contains(), startsWith(), endsWith(),
always(), success(), failure(), cancelled().

An expression outside that subset raises AssertionError, so a workflow change that needs more
fails a test instead of being evaluated wrongly.
"""

from __future__ import annotations

import re
from typing import Any

TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||[!(),])"
    r"|(?P<name>[A-Za-z_][\w-]*(?:\.[\w*-]+)*))"
)
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text.rstrip()):
        m = TOKEN.match(text, pos)
        assert m and m.end() > pos, f"cannot read the expression at {text[pos:]!r}"
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def truthy(value: Any) -> bool:
    return value not in (None, False, 0, "") and value == value  # NaN is falsy


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def equal(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold()
    if isinstance(a, str) != isinstance(b, str):  # GitHub coerces to numbers; enough here
        return as_text(a).casefold() == as_text(b).casefold()
    return a == b


class Evaluator:
    def __init__(self, context: dict[str, Any], status: str = "success"):
        self.context = context
        self.status = status  # the job's state so far: success, failure, cancelled

    def evaluate(self, text: str) -> Any:
        self.toks, self.i = tokens(text), 0
        value = self._or()
        assert self.i == len(self.toks), f"unexpected {self.toks[self.i:]} in {text!r}"
        return value

    def interpolate(self, text: str) -> str:
        return EXPR.sub(lambda m: as_text(self.evaluate(m.group(1))), str(text))

    # -- grammar: or > and > equality > unary > primary -----------------------------------
    def _peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def _take(self, value: str) -> bool:
        if self._peek() == ("op", value):
            self.i += 1
            return True
        return False

    def _or(self) -> Any:
        left = self._and()
        while self._take("||"):
            right = self._and()
            left = left if truthy(left) else right
        return left

    def _and(self) -> Any:
        left = self._equality()
        while self._take("&&"):
            right = self._equality()
            left = right if truthy(left) else left
        return left

    def _equality(self) -> Any:
        left = self._unary()
        while (tok := self._peek()) and tok[0] == "op" and tok[1] in ("==", "!="):
            self.i += 1
            right = self._unary()
            left = equal(left, right) if tok[1] == "==" else not equal(left, right)
        return left

    def _unary(self) -> Any:
        if self._take("!"):
            return not truthy(self._unary())
        return self._primary()

    def _primary(self) -> Any:
        tok = self._peek()
        assert tok is not None, "expression ends early"
        self.i += 1
        kind, text = tok
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text) if "." in text else int(text)
        if kind == "op" and text == "(":
            value = self._or()
            assert self._take(")"), "missing )"
            return value
        assert kind == "name", f"unexpected {text!r}"
        if self._take("("):
            return self._call(text)
        return self._lookup(text)

    def _call(self, name: str) -> Any:
        args = []
        if not self._take(")"):
            args.append(self._or())
            while self._take(","):
                args.append(self._or())
            assert self._take(")"), "missing ) after arguments"
        return FUNCTIONS[name.lower()](self, *args)

    def _lookup(self, path: str) -> Any:
        words = {"true": True, "false": False, "null": None}
        if path in words:
            return words[path]
        value: Any = self.context
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value


def _format(_: Evaluator, template: str, *args: Any) -> str:
    return re.sub(r"\{(\d+)\}", lambda m: as_text(args[int(m.group(1))]), template)


FUNCTIONS = {
    "format": _format,
    "contains": lambda _, hay, needle: (
        any(equal(x, needle) for x in hay) if isinstance(hay, list)
        else as_text(needle).casefold() in as_text(hay).casefold()
    ),
    "startswith": lambda _, s, p: as_text(s).casefold().startswith(as_text(p).casefold()),
    "endswith": lambda _, s, p: as_text(s).casefold().endswith(as_text(p).casefold()),
    "always": lambda _: True,
    "success": lambda ev: ev.status == "success",
    "failure": lambda ev: ev.status == "failure",
    "cancelled": lambda ev: ev.status == "cancelled",
}


def evaluate_if(condition: object, context: dict[str, Any], status: str = "success") -> bool:
    """A job's or step's `if:` as GitHub reads it: a bare expression or one in ${{ }}; no
    status function means success() && (condition)."""
    text = str(condition).strip()
    m = EXPR.fullmatch(text)
    text = m.group(1) if m else text
    has_status = re.search(r"\b(always|success|failure|cancelled)\s*\(", text)
    ev = Evaluator(context, status)
    return truthy(ev.evaluate(text)) and (bool(has_status) or status == "success")
