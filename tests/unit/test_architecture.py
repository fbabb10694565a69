"""ARCHITECTURE.md stays a true map: every module of gate/ is named there, every module it
names exists, and its layer table matches the import contract that `make lint` enforces."""

from __future__ import annotations

import re
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
