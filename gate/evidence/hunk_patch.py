"""Some of a change's hunks applied onto its parent's files, with `git apply` of a patch that
holds only those hunks (docs/bisect.md#the-smallest-set-of-hunks).

The elements are the hunks of the change's Python files in the package, as gate.evidence.hunks
extracts them (`git diff parent head`). For a subset, each touched file's patch keeps its
header and the chosen hunks; every hunk keeps its own line numbers in the parent file, which
leaving other hunks out does not move, and `git apply` checks each hunk's context. The files
are written into a scratch repository (`git init`), so paths resolve there whatever
repository encloses the folder."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from gate.core.git import apply_patch, file_at, run_git
from gate.evidence.hunks import Hunk, HunkSet, extract_hunks

_HEADER = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def python_hunks(repo: Path, parent: str, head: str, package: str = "vllm") -> HunkSet:
    """The hunks of `head`'s Python files in `package` against `parent`, in diff order (a
    pure rename or a mode change has no body and is no element)."""
    hunkset = extract_hunks(repo, parent, head, [f"{package}/"])
    chosen = [h for h in hunkset.hunks if h.path.endswith(".py") and h.text
              and (h.old_path is None or h.old_path.endswith(".py"))]
    chosen.sort(key=lambda h: (h.path, h.old_start, h.new_start))
    return hunkset.model_copy(update={"hunks": chosen})


def _file_patch(repo: Path, parent: str, head: str, hunk: Hunk) -> str:
    paths = [p for p in (hunk.old_path, hunk.path) if p]
    args: list[str | bytes] = ["diff", "-M", "--no-color", "--no-ext-diff", "--no-textconv",
                               parent, head, "--", *[f":(literal){p}" for p in paths]]
    return run_git(repo, args, f"diffing {hunk.path}").decode("utf-8", "replace")


def select_hunks(patch: str, wanted: list[Hunk]) -> str:
    """`patch` (one file's `git diff`) with only the hunks in `wanted` (matched by their
    start lines), its header kept."""
    keys = {(h.old_start, h.new_start) for h in wanted}
    lines = patch.splitlines(keepends=True)
    out, keep, seen_hunk = [], True, False
    for line in lines:
        match = _HEADER.match(line)
        if match:
            seen_hunk = True
            keep = (int(match.group(1)), int(match.group(2))) in keys
        if keep or not seen_hunk:
            out.append(line)
    return "".join(out)


def apply_hunks(repo: Path, parent: str, *, head: str, hunks: list[Hunk], scratch: Path
                ) -> dict[str, bytes | None]:
    """The contents of every file `hunks` touch after applying them (and no other hunk)
    onto `parent`'s versions: path -> bytes, None for a file the hunks delete. A GateError
    when the hunks do not apply."""
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    run_git(scratch, ["init", "--quiet"], "making a scratch repository")
    by_file: dict[tuple[str | None, str], list[Hunk]] = {}
    for h in hunks:
        by_file.setdefault((h.old_path, h.path), []).append(h)
    touched, patch = set(), []
    for (old_path, path), chosen in by_file.items():
        source = old_path or path
        if chosen[0].change != "added":
            target = scratch / source
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(file_at(repo, parent, source))
        touched |= {source, path}
        patch.append(select_hunks(_file_patch(repo, parent, head, chosen[0]), chosen))
    patch_file = scratch.parent / f"{scratch.name}.patch"
    patch_file.write_text("".join(patch), encoding="utf-8")
    apply_patch(scratch, patch_file)
    return {p: (scratch / p).read_bytes() if (scratch / p).is_file() else None
            for p in sorted(touched)}
