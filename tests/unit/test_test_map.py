"""Every module of gate/ has a test file that imports it, so no module is tested only through
others. The commands in gate/cli/ are the exception: the CLI tests reach them through
`gate.cli.main` or a subprocess (tests/support/cli.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from support.paths import REPO_ROOT

GATE = REPO_ROOT / "gate"
TESTS = REPO_ROOT / "tests"


def gate_modules() -> set[str]:
    """Dotted names of the modules that need a test file of their own."""
    return {".".join(p.relative_to(REPO_ROOT).with_suffix("").parts) for p in GATE.rglob("*.py")
            if p.name not in ("__init__.py", "__main__.py") and p.parent.name != "cli"}


def imported_by(test_file: Path) -> set[str]:
    """Every dotted name a file imports; `from a.b import c` counts as `a.b` and `a.b.c`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(test_file.read_text(), str(test_file))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def all_test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_every_gate_module_has_a_test_file_that_imports_it():
    imported = set().union(*(imported_by(path) for path in all_test_files()))
    assert sorted(gate_modules() - imported) == []


def test_the_map_sees_the_modules_and_the_imports():
    """The check above cannot pass by finding nothing."""
    modules = gate_modules()
    assert {"gate.core.files", "gate.report.fit", "gate.flows.ab"} <= modules
    assert not any(m.startswith("gate.cli.") for m in modules)
    assert "gate.report.fit" in imported_by(TESTS / "unit" / "report" / "test_fit.py")
