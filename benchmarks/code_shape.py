"""The shape of the gate's code and docs, counted the way docs/testing.md and the notes report
it: lines, modules, functions, classes, functions with keyword-only parameters, calls with five
or more positional arguments, the file kinds whose reader checks the schema version, and the
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


LOADERS = ("load_json_model", "load_record", "load_records", "load_state")  # load_state: bisect's


def _name(node: ast.AST) -> str:
    return getattr(node, "id", getattr(node, "attr", ""))


def versioned_kinds(sources: dict[str, str]) -> tuple[int, int]:
    """(file kinds whose reader checks the schema version, file kinds): a kind is a model class
    with a `schema_version` field. Its reader checks the version when the file is read through
    a loader that compares it (`load_record` always; `load_json_model` where core/files.py's
    version of it reads `schema_version`), or through a function of its own that compares
    against a *SCHEMA_VERSION constant (the older style)."""
    trees = {path: ast.parse(text) for path, text in sources.items()}
    kinds = {node.name for tree in trees.values() for node in ast.walk(tree)
             if isinstance(node, ast.ClassDef) and any(
                 isinstance(b, ast.AnnAssign) and _name(b.target) == "schema_version"
                 for b in node.body)}
    json_checks = "schema_version" in "".join(
        ast.unparse(node) for path, tree in trees.items() if path.endswith("core/files.py")
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "load_json_model")
    checked: set[str] = set()
    for tree in trees.values():
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            own_compare = any(isinstance(n, ast.Compare) and any(
                isinstance(m, ast.Name) and m.id.endswith("SCHEMA_VERSION") for m in ast.walk(n))
                for n in ast.walk(fn))
            for call in ast.walk(fn):
                if not (isinstance(call, ast.Call) and _name(call.func) in LOADERS and call.args):
                    continue
                kind = _name(call.args[0])
                if kind in kinds and (own_compare or json_checks
                                      or _name(call.func) != "load_json_model"):
                    checked.add(kind)
    return len(checked), len(kinds)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", help="a commit (default: the working tree)")
    args = ap.parse_args()
    code = files_at(args.rev, "gate", ".py")
    docs = files_at(args.rev, "docs", ".md")
    docs["README.md"] = files_at(args.rev, ".", "README.md").get("README.md", "") \
        if args.rev else (ROOT / "README.md").read_text()
    figures = shape(code)
    checked, kinds = versioned_kinds(code)
    figures["file kinds whose version is checked"] = f"{checked} of {kinds}"  # type: ignore[assignment]
    print(f"at {args.rev or 'the working tree'}:")
    for key, value in figures.items():
        print(f"  {key}: {value}")
    print(f"  docs lines: {sum(t.count(chr(10)) for t in docs.values())} "
          + ", ".join(f"{Path(n).name} {t.count(chr(10))}" for n, t in sorted(docs.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
