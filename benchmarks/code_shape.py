"""The shape of the gate's code and docs, counted the way docs/testing.md and the notes report
it: lines, modules, functions, classes, functions with keyword-only parameters, calls with five
or more positional arguments, the file kinds whose loader checks a schema version, and the
lines of each doc. Counted with `ast` over gate/ (tests excluded), at any commit:

    python benchmarks/code_shape.py [--rev REV]   # REV: a commit, read with git show
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def files_at(rev: str | None, prefix: str, suffix: str) -> dict[str, str]:
    """path -> text of the files under `prefix` ending in `suffix`, at `rev` (None: the
    working tree)."""
    if rev is None:
        return {str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / prefix).rglob(f"*{suffix}")
                if "__pycache__" not in p.parts}
    names = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", rev, prefix],
                           capture_output=True, text=True, check=True).stdout.split()
    return {n: subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{n}"], capture_output=True,
                              text=True, check=True).stdout
            for n in names if n.endswith(suffix)}


def shape(sources: dict[str, str]) -> dict[str, int]:
    out = {"lines": 0, "modules": len(sources), "functions": 0, "classes": 0,
           "keyword_only": 0, "calls_5_positional": 0}
    for text in sources.values():
        out["lines"] += text.count("\n")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                out["functions"] += 1
                out["keyword_only"] += bool(node.args.kwonlyargs)
            elif isinstance(node, ast.ClassDef):
                out["classes"] += 1
            elif isinstance(node, ast.Call):
                positional = [a for a in node.args if not isinstance(a, ast.Starred)]
                out["calls_5_positional"] += len(positional) >= 5
    return out


def is_versioned_load(node: ast.AST) -> bool:
    """A call of load_versioned, or a comparison against a *SCHEMA_VERSION constant."""
    if isinstance(node, ast.Call):
        return getattr(node.func, "id", getattr(node.func, "attr", "")) == "load_versioned"
    return isinstance(node, ast.Compare) and any(
        isinstance(n, ast.Name) and n.id.endswith("SCHEMA_VERSION") for n in ast.walk(node))


def versioned_loaders(sources: dict[str, str]) -> int:
    """Loaders that check a file's schema version: calls of the one versioned loader
    (load_versioned), or a comparison against a *SCHEMA_VERSION constant."""
    found = 0
    for text in sources.values():
        for node in ast.walk(ast.parse(text)):
            found += is_versioned_load(node)
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", help="a commit (default: the working tree)")
    args = ap.parse_args()
    code = files_at(args.rev, "gate", ".py")
    docs = files_at(args.rev, "docs", ".md")
    docs["README.md"] = files_at(args.rev, ".", "README.md").get("README.md", "") \
        if args.rev else (ROOT / "README.md").read_text()
    figures = shape(code)
    figures["versioned_loaders"] = versioned_loaders(code)
    print(f"at {args.rev or 'the working tree'}:")
    for key, value in figures.items():
        print(f"  {key}: {value}")
    print(f"  docs lines: {sum(t.count(chr(10)) for t in docs.values())} "
          + ", ".join(f"{Path(n).name} {t.count(chr(10))}" for n, t in sorted(docs.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
