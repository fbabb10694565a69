"""evidence.json: the PR's hunks ranked by measured evidence from the profile diff.

For every hunk, the changed lines (added lines in the head file, removed lines in the base
file) are mapped to the functions whose source spans contain them: the Python file is parsed
with `ast` at the head commit (removed lines: at the merge-base), and each function gets the
qualified name the interpreter reports (`Class.method`, `outer.<locals>.inner`), which is
how py-spy names it. Then, hunks touching

  1. a function with significantly more self time in the head (the time is spent in it),
  2. a function with significantly more inclusive time (in it or in what it calls),
  3. nothing measurably slower,

rank in that order; within a tier the larger added time first, then the pattern score
(Hunk.score), then diff order. Functions with added self time that no hunk touches are listed
apart: a dependency or a caller changed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gate.core.errors import GateError
from gate.core.files import load_json_model, write_atomic
from gate.core.git import resolve_ref, run_git
from gate.evidence.hunks import Hunk, HunkSet, rank
from gate.profile.diff_file import UNIT, FunctionDiff, ProfileDiff

EVIDENCE_SCHEMA_VERSION = 1
EVIDENCE_FILE = "evidence.json"
# Code objects without a `def` of their own: their time belongs to the enclosing function.
_ANONYMOUS = ("<lambda>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")
Tier = Literal["self", "inclusive", "none"]
_TIER_ORDER = {"self": 0, "inclusive": 1, "none": 2}


@dataclass(frozen=True)
class FunctionSpan:
    name: str  # qualified, as co_qualname
    start: int  # first line, decorators included
    end: int


def function_spans(source: str) -> list[FunctionSpan]:
    """Every def in `source` with its qualified name and line span, outer before inner."""
    spans: list[FunctionSpan] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + node.name
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                spans.append(FunctionSpan(name, start, node.end_lineno or node.lineno))
                visit(node.body, name + ".<locals>.")
            elif isinstance(node, ast.ClassDef):
                visit(node.body, prefix + node.name + ".")
            else:  # if/try/with/for/match blocks may hold defs too (if TYPE_CHECKING:, ...)
                for attr in ("body", "orelse", "finalbody"):
                    inner = getattr(node, attr, None)
                    if isinstance(inner, list):
                        visit(inner, prefix)
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, (ast.ExceptHandler, ast.match_case)):
                        visit(child.body, prefix)

    visit(ast.parse(source).body, "")
    return spans


def innermost(spans: list[FunctionSpan], line: int) -> FunctionSpan | None:
    inside = [s for s in spans if s.start <= line <= s.end]
    return max(inside, key=lambda s: s.start, default=None)


def changed_lines(hunk: Hunk) -> tuple[list[int], list[int]]:
    """(added line numbers in the head file, removed line numbers in the base file)."""
    added, removed = [], []
    new, old = hunk.new_start, hunk.old_start
    for line in hunk.text.split("\n"):
        tag = line[:1]
        if tag == "+":
            added.append(new)
            new += 1
        elif tag == "-":
            removed.append(old)
            old += 1
        elif tag != "\\":  # "\ No newline at end of file" is not a line
            new, old = new + 1, old + 1
    return added, removed


class FunctionEvidence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    file: str
    lines: str = Field("", description="start-end in the file the hunk was matched in")
    self_diff: float | None = Field(None, description=f"{UNIT}; None: not in the profile diff")
    self_significant: bool = False
    inclusive_diff: float | None = None
    inclusive_significant: bool = False

    @property
    def tier(self) -> Tier:
        if self.self_significant and (self.self_diff or 0) > 0:
            return "self"
        if self.inclusive_significant and (self.inclusive_diff or 0) > 0:
            return "inclusive"
        return "none"

    @property
    def added_ms(self) -> float:
        t = self.tier
        return (self.self_diff if t == "self" else self.inclusive_diff if t == "inclusive"
                else 0.0) or 0.0

    def sentence(self) -> str:
        """'+14 ms per 1k output tokens in apply_grammar_bitmask, utils.py:128-198'."""
        kind = "" if self.tier == "self" else " (inclusive: in it or what it calls)"
        where = f"{self.file}:{self.lines}" if self.lines else self.file
        return f"{signed_ms(self.added_ms)} per 1k output tokens{kind} in {self.name}, {where}"


class RankedHunk(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rank: int
    index: int = Field(description="position in hunks.json's list")
    path: str
    section: str = ""
    new_start: int = 0
    old_start: int = 0
    score: float = Field(0.0, description="pattern score: breaks ties only")
    mechanisms: list[str] = Field(default_factory=list)
    tier: Tier = "none"
    added_ms: float = Field(0.0, description=f"the evidence figure, {UNIT}")
    evidence: str | None = Field(None, description="one line: figure, function, file:lines")
    functions: list[FunctionEvidence] = Field(default_factory=list,
                                              description="every function its lines touch")


class Evidence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = EVIDENCE_SCHEMA_VERSION
    unit: str = UNIT
    hunks: list[RankedHunk] = Field(default_factory=list, description="evidence first")
    untouched: list[FunctionEvidence] = Field(
        default_factory=list,
        description="functions with added self time that no hunk touches: a dependency or a "
                    "caller changed")
    notes: list[str] = Field(default_factory=list)


def signed_ms(value: float) -> str:
    return f"{value:+.0f} ms" if abs(value) >= 10 else f"{value:+.1f} ms"


class SourceAt:
    """Function spans of files at a commit, read with `git show` and cached."""

    def __init__(self, repo: Path, rev: str, notes: list[str]):
        self.repo, self.rev, self.notes = repo, rev, notes
        self.cache: dict[str, list[FunctionSpan]] = {}

    def spans(self, path: str) -> list[FunctionSpan]:
        if path not in self.cache:
            self.cache[path] = self._read(path)
        return self.cache[path]

    def _read(self, path: str) -> list[FunctionSpan]:
        if not path.endswith(".py"):
            return []
        try:
            source = run_git(self.repo, ["show", f"{self.rev}:{path}"], f"reading {path}")
            return function_spans(source.decode("utf-8", "replace"))
        except GateError as exc:
            self.notes.append(f"{path} at {self.rev[:12]}: {exc}")
        except (SyntaxError, ValueError) as exc:
            self.notes.append(f"{path} at {self.rev[:12]} does not parse: {exc}")
        return []


def same_file(profile_file: str, path: str) -> bool:
    return profile_file == path or profile_file.endswith("/" + path)


def lookup(diff: ProfileDiff, path: str, span: FunctionSpan) -> list[FunctionDiff]:
    """The profile's rows for this function and its anonymous inner code (comprehensions)."""
    inner = tuple(f"{span.name}.<locals>.{a}" for a in _ANONYMOUS)
    return [f for f in diff.functions if same_file(f.file, path)
            and (f.name == span.name or f.name.startswith(inner))]


def evidence_for(path: str, span: FunctionSpan, rows: list[FunctionDiff]) -> FunctionEvidence:
    ev = FunctionEvidence(name=span.name, file=path, lines=f"{span.start}-{span.end}")
    if rows:
        best = max(rows, key=lambda f: (f.self_time.significant, f.self_time.diff))
        ev.self_diff, ev.self_significant = best.self_time.diff, best.self_time.significant
        top = max(rows, key=lambda f: (f.inclusive.significant, f.inclusive.diff))
        ev.inclusive_diff, ev.inclusive_significant = top.inclusive.diff, top.inclusive.significant
    return ev


def touched(hunk: Hunk, head: SourceAt, base: SourceAt) -> list[tuple[str, FunctionSpan]]:
    """(path, function) for every function holding a changed line of the hunk."""
    added, removed = changed_lines(hunk)
    found: dict[tuple[str, str], tuple[str, FunctionSpan]] = {}
    if hunk.change != "deleted":
        spans = head.spans(hunk.path)
        for line in added:
            if (span := innermost(spans, line)) is not None:
                found.setdefault((hunk.path, span.name), (hunk.path, span))
    base_path = hunk.old_path or hunk.path
    if hunk.change != "added":
        spans = base.spans(base_path)
        for line in removed:
            if (span := innermost(spans, line)) is not None:
                # The head's name for it, where the file was renamed.
                found.setdefault((hunk.path, span.name), (hunk.path, span))
    return list(found.values())


def rank_hunks_by_evidence(hunkset: HunkSet, diff: ProfileDiff, repo: str | Path) -> Evidence:
    """Rank `hunkset`'s hunks by the profile diff's added time (see the module docstring)."""
    repo_path = Path(repo)
    notes: list[str] = []
    head = SourceAt(repo_path, resolve_ref(repo_path, hunkset.head), notes)
    base = SourceAt(repo_path, hunkset.merge_base, notes)
    ranked, seen = [], set()
    for index, hunk in enumerate(hunkset.hunks):
        functions = [evidence_for(path, span, lookup(diff, path, span))
                     for path, span in touched(hunk, head, base)]
        seen |= {(f.file, f.name) for f in functions}
        best = min(functions, key=lambda f: (_TIER_ORDER[f.tier], -f.added_ms), default=None)
        tier = best.tier if best else "none"
        ranked.append(RankedHunk(
            rank=0, index=index, path=hunk.path, section=hunk.section, new_start=hunk.new_start,
            old_start=hunk.old_start, score=hunk.score, mechanisms=hunk.mechanisms, tier=tier,
            added_ms=best.added_ms if best else 0.0,
            evidence=best.sentence() if best and tier != "none" else None, functions=functions,
        ))
    ranked.sort(key=lambda h: (_TIER_ORDER[h.tier], -h.added_ms, -h.score, h.index))
    for position, h in enumerate(ranked, 1):
        h.rank = position
    return Evidence(hunks=ranked, untouched=untouched(diff, seen), notes=notes)


def apply_evidence(hunkset: HunkSet, evidence: Evidence | None) -> HunkSet:
    """The one order of the PR's hunks, for the comment and the annotations alike: those with
    measured evidence first, in the evidence's order (added time, patterns breaking ties),
    each carrying its evidence line; then the rest by their pattern score (gate.evidence.hunks
    .rank), diff order breaking ties."""
    if evidence is None:
        return hunkset.model_copy(update={"hunks": rank(list(hunkset.hunks))})
    by_index = {h.index: h for h in evidence.hunks}
    known = [hunkset.hunks[h.index].model_copy(update={"evidence": h.evidence})
             for h in sorted(evidence.hunks, key=lambda h: h.rank)
             if h.index < len(hunkset.hunks) and hunkset.hunks[h.index].path == h.path]
    rest = rank([h for i, h in enumerate(hunkset.hunks)
                 if i not in by_index or hunkset.hunks[i].path != by_index[i].path])
    return hunkset.model_copy(update={"hunks": known + rest})


def untouched(diff: ProfileDiff, seen: set[tuple[str, str]]) -> list[FunctionEvidence]:
    """Functions with significantly more self time that no hunk's lines fall in."""
    def is_seen(f: FunctionDiff) -> bool:
        return any(same_file(f.file, path) and (f.name == name or f.name.startswith(
            tuple(f"{name}.<locals>.{a}" for a in _ANONYMOUS))) for path, name in seen)

    return [FunctionEvidence(name=f.name, file=f.file, lines=str(f.line) if f.line else "",
                             self_diff=f.self_time.diff, self_significant=True,
                             inclusive_diff=f.inclusive.diff,
                             inclusive_significant=f.inclusive.significant)
            for f in diff.functions
            if f.self_time.significant and f.self_time.diff > 0 and not is_seen(f)]


def save_evidence(evidence: Evidence, path: Path) -> Path:
    write_atomic(path, evidence.model_dump_json(indent=1))
    return path


def load_evidence(path: str | Path) -> Evidence:
    return load_json_model(Evidence, Path(path), "evidence file")
