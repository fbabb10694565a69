"""Three builds of vLLM's V1 bitmask staging over one installed build, as commits of a small git
repository (for `gate ab --repo`): the seed regression as a real hunk, not a fixture.

- `main`: `vllm/v1/structured_output/utils.py` as installed;
- `culprit`: `apply_grammar_bitmask` staging the bitmask in a fresh pinned host tensor every
  engine step (`torch.full(..., pin_memory=True)`, PR 45424's form; vLLM issue 49013). vLLM
  0.32/0.33 still allocate a fresh staging tensor per call (`pin_memory=PIN_MEMORY`, True on a
  GPU): there `main` already stages per step, and `fix` against `main` shows what it costs;
- `fix`: the same function staging into one of two pinned buffers allocated once and reused
  round-robin (the fix's shape), so no host allocation or pinning happens per step.

The history is the seed's: `fix` first, `main` on it (so `gate hunks --base fix --head main`
shows the change that brought the per-step staging back), `culprit` on `main`. Each rewrite is
anchored on the AST of `apply_grammar_bitmask` and checked to be exactly one
hunk of the function (the function has moved between vLLM versions: a rewrite that does not
apply is an error, never a silent no-op).

    python benchmarks/seed_builds.py --python PY --repo DIR [--json OUT]
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the gate of this checkout
from gate.runner.overlay import installed_package  # noqa: E402

UTILS = "vllm/v1/structured_output/utils.py"
# The staging allocation of V1's apply_grammar_bitmask (vLLM 0.2x-0.33): a fresh host tensor.
ALLOCATION = re.compile(
    r"(?P<indent>[ \t]+)(?P<name>\w+) = torch\.full\(\s*\((?P<shape>[^)]*)\),\s*-1,\s*"
    r"dtype=(?P<dtype>[^\n]*?),\s*pin_memory=(?P<pin>[\w.]+),?\s*\)", re.S)
FIX_HELPER = '''

# Two pinned staging buffers allocated once and used in turn, so that no engine step allocates
# (or pins) host memory, and the copy of one step is never overwritten by the next.
_STAGING: list[torch.Tensor] = []
_STAGING_TURN = [0]


def _staging_buffer(shape, dtype) -> torch.Tensor:
    rows, width = shape
    if not _STAGING or _STAGING[0].shape[0] < rows or _STAGING[0].shape[1] != width:
        _STAGING[:] = [torch.empty((max(rows, 384), width), dtype=dtype,
                                   pin_memory=PIN_MEMORY) for _ in range(2)]
    _STAGING_TURN[0] ^= 1
    view = _STAGING[_STAGING_TURN[0]][:rows]
    view.fill_(-1)
    return view
'''


def function_span(source: str, name: str = "apply_grammar_bitmask") -> tuple[int, int]:
    """The character span of the function's definition in `source`."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            start = sum(len(line) for line in lines[:node.lineno - 1])
            end = sum(len(line) for line in lines[:node.end_lineno])
            return start, end
    raise SystemExit(f"seed_builds: no function {name} in {UTILS}")


def rewrite(source: str, replace) -> str:
    """`source` with the staging allocation inside apply_grammar_bitmask replaced."""
    start, end = function_span(source)
    body = source[start:end]
    match = ALLOCATION.search(body)
    if match is None:
        raise SystemExit("seed_builds: apply_grammar_bitmask has no torch.full(..., -1, ...) "
                         "staging here; this vLLM stages its bitmask another way")
    return source[:start] + body[:match.start()] + replace(match) + body[match.end():] + \
        source[end:]


def culprit(source: str) -> str:
    return rewrite(source, lambda m: (
        f"{m['indent']}{m['name']} = torch.full(\n{m['indent']}    ({m['shape']}),\n"
        f"{m['indent']}    -1,\n{m['indent']}    dtype={m['dtype']},\n"
        f"{m['indent']}    pin_memory=True,\n{m['indent']})"))


def fix(source: str) -> str:
    fixed = rewrite(source, lambda m: f"{m['indent']}{m['name']} = _staging_buffer(("
                    f"{m['shape']}), {m['dtype']})")
    start, end = function_span(fixed)
    return fixed[:start] + FIX_HELPER.lstrip("\n") + "\n\n" + fixed[start:]


def hunks(old: str, new: str) -> int:
    return sum(1 for line in difflib.unified_diff(old.splitlines(), new.splitlines(), n=3)
               if line.startswith("@@"))


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "gpu-check", "GIT_AUTHOR_EMAIL": "gpu-check@localhost",
           "GIT_COMMITTER_NAME": "gpu-check", "GIT_COMMITTER_EMAIL": "gpu-check@localhost",
           "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def build(python: str, repo: Path) -> dict:
    installed = (installed_package(python).parent / UTILS).read_text()
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "fix")
    commits = {}
    sources = {"main": installed, "culprit": culprit(installed), "fix": fix(installed)}
    # History as the seed's: the fix's staging first, the installed build's per-step staging
    # as the change on top of it (fix..main is the regression's hunks), the culprit after.
    for name in ("fix", "main", "culprit"):
        git(repo, "checkout", "-q", "-B", name)
        target = repo / UTILS
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(sources[name])
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--allow-empty", "-m", f"{name}: apply_grammar_bitmask")
        commits[name] = git(repo, "rev-parse", "HEAD")
    found = {name: hunks(installed, sources[name]) for name in ("culprit", "fix")}
    if found["fix"] < 1 or found["culprit"] > 1:
        raise SystemExit(f"seed_builds: the rewrites are not one hunk each: {found}")
    return {"repo": str(repo), "commits": commits, "hunks": found,
            # the installed build allocates a fresh staging tensor per call (ALLOCATION matched)
            "main_stages_per_step": True}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable, help="the installed build's interpreter")
    ap.add_argument("--repo", type=Path, required=True, help="the repository to create (new)")
    ap.add_argument("--json", type=Path, help="write the summary here too")
    args = ap.parse_args()
    if args.repo.exists() and any(args.repo.iterdir()):
        raise SystemExit(f"seed_builds: {args.repo} exists and is not empty")
    summary = build(args.python, args.repo)
    text = json.dumps(summary, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
