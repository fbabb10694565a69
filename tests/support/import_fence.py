"""Run `gate` with only some installed distributions importable: what a job that installed
the gate from a lock (`pip install --require-hashes -r LOCK`, then the gate with --no-deps)
can import. Used as a script:

    python tests/support/import_fence.py requirements/poster.txt ARGV...

The lock's `name==version` lines name the distributions; their top-level modules (looked up in
this interpreter's installed metadata) may be imported from site-packages; any other module
found there raises ModuleNotFoundError("... is not in LOCK"), as in a venv that lacks it. The
standard library and `gate` (on PYTHONPATH) are outside site-packages and import as usual.
"""

from __future__ import annotations

import importlib.abc
import importlib.metadata
import re
import site
import sys
from importlib.machinery import PathFinder
from pathlib import Path

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", re.M)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_distributions(lock: Path) -> set[str]:
    return {normalize(name) for name in PIN.findall(lock.read_text())}


def importable_modules(distributions: set[str]) -> set[str]:
    owners = importlib.metadata.packages_distributions()
    return {top for top, dists in owners.items()
            if any(normalize(d) in distributions for d in dists)}


SITE_PACKAGES = tuple(str(Path(p).resolve()) for p in site.getsitepackages())


class Fence(importlib.abc.MetaPathFinder):
    def __init__(self, allowed: set[str], lock: Path):
        self.allowed, self.lock = allowed, lock

    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if "." in name or top in self.allowed:
            return None  # submodules follow their package; the normal finders decide
        spec = PathFinder.find_spec(name, path)
        origin = (spec.origin or "") if spec else ""
        locations = list(spec.submodule_search_locations or []) if spec else []
        where = [str(Path(x).resolve()) for x in [origin, *locations] if x]
        if any(w.startswith(SITE_PACKAGES) for w in where):
            raise ModuleNotFoundError(f"No module named {name!r} ({top} is not in {self.lock})",
                                      name=name)
        return None


def main() -> int:
    lock = Path(sys.argv[1])
    sys.meta_path.insert(0, Fence(importable_modules(locked_distributions(lock)), lock))
    from gate.cli import main as gate_main

    return gate_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
