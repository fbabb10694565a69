"""A stage's public names resolve from its package, on first use, and only then import the
module that defines them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gate.core.exports import lazy_exports


def test_names_resolve_from_their_module_and_unknown_ones_are_attribute_errors():
    getattr_, names = lazy_exports("gate.core", {"text": ["one_line"], "errors": ["GateError"]})
    assert names == ["GateError", "one_line"]
    from gate.core.text import one_line

    assert getattr_("one_line") is one_line
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        getattr_("nope")


def test_importing_one_module_of_a_stage_does_not_import_the_stage():
    code = ("import sys; import gate.judge.verdict; "
            "print('gate.judge.compare' in sys.modules, 'scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]
