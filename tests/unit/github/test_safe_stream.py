"""SafeStream, what the gate's output goes through, read as a GitHub runner reads it: a line
that a runner would take as a workflow command is quoted, whatever the writes look like."""

from __future__ import annotations

import io

import pytest
from support.action_runner import runner_commands

from gate.github.workflow_commands import SafeStream, workflow_command


def filtered(*writes: str) -> str:
    raw = io.StringIO()
    stream = SafeStream(raw)
    for w in writes:
        stream.write(w)
    stream.finish_line()
    return raw.getvalue()


@pytest.mark.parametrize("text", [
    "::error title=Perf gate::PASS\n",
    "   ::warning::x\n",
    "ok line\r::add-mask::secret\n",
    "ok\r\n::stop-commands::tok\n",
    "\u3000::add-mask::secret\n",  # .NET's TrimStart() removes every Unicode space
    "\u00a0\u2028 ::error title=Perf gate::approved\n",
    "\u200b::error::x\n",  # invisible to a culture-aware StartsWith
])
def test_lines_that_read_as_commands_are_quoted(text):
    out = filtered(text)
    assert runner_commands(out) == []
    assert out.replace("|", "", 1).replace("|", "") == text.replace("|", "")


@pytest.mark.parametrize(("text", "shown"), [
    ("\t##[error]legacy\n", "\t## [error]legacy\n"),
    ("x ##[error title=Perf gate]approved\n", "x ## [error title=Perf gate]approved\n"),
    ("key 'a' ###[warning]b ##[error]c\n", "key 'a' ### [warning]b ## [error]c\n"),
    ("#\u2060#[error]hidden\n", "## [error]hidden\n"),
])
def test_the_legacy_prefix_is_broken_wherever_it_is_in_a_line(text, shown):
    """The runner's TryParse finds `##[` anywhere in a line (IndexOf), not only at its start."""
    out = filtered(text)
    assert runner_commands(out) == [] and out == shown


def test_a_legacy_prefix_split_across_writes_is_still_broken():
    out = filtered("gate: error: key x #", "#[", "error]y", "\n")
    assert runner_commands(out) == [] and out == "gate: error: key x ## [error]y\n"


def test_a_command_split_across_writes_is_still_caught():
    out = filtered("gate: error: bad key\n", "  :", ":error title=x::y", "\n")
    assert runner_commands(out) == [] and "|  ::error title=x::y" in out


def test_ordinary_text_and_mid_line_colons_pass_unchanged():
    text = "plan a::b, ratio 1.2x :: ok\nnext line: fine\n"
    assert filtered(text) == text


def test_the_gates_own_commands_pass_through():
    raw = io.StringIO()
    stream = SafeStream(raw)
    stream.write("partial")
    workflow_command(stream, "::warning file=a.py,line=3::message%0Amore")
    assert raw.getvalue() == "partial\n::warning file=a.py,line=3::message%0Amore\n"
    assert runner_commands(raw.getvalue()) == ["::warning file=a.py,line=3::message%0Amore"]
