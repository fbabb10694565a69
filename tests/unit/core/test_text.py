"""gate.core.text: untrusted text on one bounded line, bidirectional controls shown."""

from __future__ import annotations

import pytest

from gate.core.text import one_line, reveal_bidi


def test_whitespace_runs_fold_to_one_space_and_the_ends_are_trimmed():
    assert one_line("  a\n\tb \r\n c  ", 100) == "a b c"


def test_control_characters_are_dropped_not_shown():
    assert one_line("ok\x00\x07\x1b[31mred\x7f", 100) == "ok[31mred"


@pytest.mark.parametrize("control", ["\u202e", "\u2066", "\u2069", "\u200e", "\u200f", "\u061c"])
def test_bidi_controls_are_shown_as_code_points(control):
    shown = reveal_bidi(f"a{control}b")
    assert shown == f"a<U+{ord(control):04X}>b" and control not in shown


def test_a_cut_ends_in_an_ellipsis_within_the_limit():
    text = one_line("word " * 40, 21)
    assert len(text) <= 21 and text.endswith("…")
    assert text == "word word word word…"  # a space just before the cut goes too


def test_text_at_the_limit_is_not_cut():
    assert one_line("x" * 20, 20) == "x" * 20
    assert one_line("x" * 21, 20) == "x" * 19 + "…"


def test_bidi_controls_count_as_their_visible_form_towards_the_limit():
    text = one_line("\u202e" * 10, 30)
    assert text.startswith("<U+202E>") and len(text) <= 30 and text.endswith("…")


def test_non_strings_are_shown_as_their_text():
    assert one_line(12.5, 10) == "12.5"  # type: ignore[arg-type]
