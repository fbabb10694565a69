"""ARCHITECTURE.md stays a true map: every module of gate/ is named there, every module it
names exists, its layer table matches the import contract that `make lint` enforces, and
importing one module of a stage imports only what that module needs."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib

from support.paths import REPO_ROOT

GATE = REPO_ROOT / "gate"
MAP = (REPO_ROOT / "ARCHITECTURE.md").read_text()


def modules_on_disk() -> set[str]:
    return {str(p.relative_to(GATE)) for p in GATE.rglob("*.py")
            if p.name not in ("__init__.py", "__main__.py")}


def modules_in_map() -> set[str]:
    """`pkg/`: then the module files named on the same bullet (`name.py`)."""
    named = set()
    for bullet in re.split(r"\n- ", MAP.split("## Modules", 1)[1].split("\n## ", 1)[0]):
        head = re.match(r"`(\w+)/`:", bullet.strip())
        if head:
            named |= {f"{head.group(1)}/{m}" for m in re.findall(r"`(\w+\.py)`", bullet)}
    return named


def test_every_module_is_on_the_map():
    assert modules_on_disk() - modules_in_map() == set(), "modules missing from ARCHITECTURE.md"


def test_every_module_on_the_map_exists():
    assert modules_in_map() - modules_on_disk() == set()


def test_the_layer_table_is_the_lint_contract():
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    (contract,) = config["tool"]["importlinter"]["contracts"]
    lint_order = [name.removeprefix("gate.") for name in reversed(contract["layers"])]
    table = re.findall(r"^\| \d+ \| `(\w+)` \|", MAP, re.M)
    assert table == lint_order
    assert {p.name for p in GATE.iterdir() if (p / "__init__.py").is_file()} == set(table)


def test_every_package_says_what_it_does():
    for pkg in GATE.iterdir():
        init = pkg / "__init__.py"
        if init.is_file():
            text = init.read_text()
            assert text.startswith('"""') and len(text.split('"""')[1].split()) >= 12, pkg.name


def test_importing_one_module_of_a_stage_does_not_import_the_stage():
    """Each package's `__init__.py` is its docstring alone: `gate publish` imports neither
    numpy nor scipy through a stage it touches."""
    code = ("import sys; import gate.judge.verdict; "
            "print('gate.judge.compare' in sys.modules, 'scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]


def test_every_package_init_is_its_docstring_alone():
    """No package re-exports names (nothing imports from a package root but `gate.cli`'s
    entry point, `main`): everyone imports from the module that defines a name."""
    for init in GATE.glob("*/__init__.py"):
        if init.parent.name != "cli":
            tree = ast.parse(init.read_text())
            assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr), init
