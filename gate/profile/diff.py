"""profile-diff.json: where the head build spends more (or less) time than the base, per
function, in ms of samples per 1k output tokens, and which differences are beyond noise.

Self and inclusive time per function, spin-waits (gate.profile.data.WAIT_FRAMES) left out and
reported as `waiting`. A difference is named when its seeded bootstrap interval (windows
resampled, counts Poisson-redrawn) excludes zero and it clears two floors, a share of the base
build's total and a share of the function's own figure, which stand for the noise between two
servers that one server per build cannot show. The method and how the floors were set:
docs/profile.md#noise-when-a-difference-is-named and docs/profile.md#the-floors.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from tabulate import tabulate

from gate.core.errors import MeasurementError
from gate.profile.data import BuildProfile
from gate.profile.diff_file import UNIT, Change, DiffSettings, FunctionDiff, ProfileDiff

KEEP_INSIGNIFICANT = 100  # the largest differences kept in the file besides the named ones
_CHUNK = 64  # functions per bootstrap block (bounds memory: chunk x replicates x windows)

METHOD = (
    "ms ({basis} time) of py-spy samples per 1k output tokens, summed over the sampled processes, spin-waits "
    "left out; a "
    "difference is named when its {conf:.0%} bootstrap interval (windows resampled, counts "
    "Poisson-redrawn) excludes zero and it is at least {share:.0%} of the base build's total "
    "and {rel:.0%} of the function's base figure"
)


# --------------------------------------------------------------------------------------------
# Counting: per function and window
# --------------------------------------------------------------------------------------------

@dataclass
class Series:
    """A figure per window: how many samples, and the ms they stand for."""

    counts: np.ndarray
    ms: np.ndarray

    @classmethod
    def zeros(cls, windows: int) -> Series:
        return cls(np.zeros(windows), np.zeros(windows))

    def add(self, window: int, count: int, ms: float) -> None:
        self.counts[window] += count
        self.ms[window] += count * ms


Key = tuple[str, str]


@dataclass(kw_only=True)
class Counts:
    """One build's samples per (function, window): self and inclusive, and the totals."""

    self_time: dict[Key, Series]
    inclusive: dict[Key, Series]
    lines: dict[Key, int]
    tokens: np.ndarray  # per window
    total: Series  # all samples
    waiting: Series  # samples in spin-waits (gate.profile.data.WAIT_FRAMES)


def count_functions(profile: BuildProfile, basis: str = "wall") -> Counts:
    k = len(profile.windows)
    keys = [f.key for f in profile.frames]
    self_t: dict[Key, Series] = defaultdict(lambda: Series.zeros(k))
    incl: dict[Key, Series] = defaultdict(lambda: Series.zeros(k))
    total, waiting = Series.zeros(k), Series.zeros(k)
    waits = profile.waiting_frames()
    for w, window in enumerate(profile.windows):
        weights = window.sample_ms(len(profile.processes), basis)
        for stack in window.stacks:
            ms = weights[stack.process]
            total.add(w, stack.count, ms)
            if waits.intersection(stack.frames):
                waiting.add(w, stack.count, ms)
            elif stack.frames:
                self_t[keys[stack.frames[-1]]].add(w, stack.count, ms)
                for key in {keys[i] for i in stack.frames}:
                    incl[key].add(w, stack.count, ms)
    lines: dict[Key, int] = {}
    for f in profile.frames:
        lines.setdefault(f.key, f.line)
    tokens = np.array([w.output_tokens for w in profile.windows], dtype=float)
    return Counts(self_time=dict(self_t), inclusive=dict(incl), lines=lines, tokens=tokens,
                  total=total, waiting=waiting)


def per_1k(ms: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """ms per 1k output tokens of [..., windows] ms, pooled over the windows."""
    return ms.sum(axis=-1) / tokens.sum() * 1000.0


def bootstrap_per_1k(series: Series, tokens: np.ndarray, rng: np.random.Generator,
                     replicates: int) -> np.ndarray:
    """[functions, replicates] per-1k figures of [functions, windows] series: windows
    resampled, each chosen window's count Poisson-redrawn at its ms per sample."""
    k = series.counts.shape[-1]
    idx = rng.integers(0, k, size=(replicates, k))
    tok = tokens[idx].sum(axis=-1)
    per_sample = np.divide(series.ms, series.counts, out=np.zeros_like(series.ms),
                           where=series.counts > 0)
    out = np.empty((series.counts.shape[0], replicates))
    for lo in range(0, series.counts.shape[0], _CHUNK):
        block = slice(lo, lo + _CHUNK)
        drawn = rng.poisson(series.counts[block][:, idx])  # [chunk, replicates, windows]
        out[block] = (drawn * per_sample[block][:, idx]).sum(axis=-1) / tok * 1000.0
    return out


# --------------------------------------------------------------------------------------------
# The diff
# --------------------------------------------------------------------------------------------

def judge(base: Series, head: Series, *, tokens: tuple[np.ndarray, np.ndarray],
          floor_ms: float, settings: DiffSettings, rng: np.random.Generator) -> list[Change]:
    """Changes of one metric for aligned [functions, windows] series; `tokens`: the output
    tokens of each window, base's and head's."""
    b_tokens, h_tokens = tokens
    base_ms, head_ms = per_1k(base.ms, b_tokens), per_1k(head.ms, h_tokens)
    diff = head_ms - base_ms
    tested = (np.abs(diff) >= floor_ms) & (np.abs(diff) >= settings.min_rel * base_ms)
    changes = [Change(base=round(float(x), 3), head=round(float(y), 3), diff=round(float(d), 3))
               for x, y, d in zip(base_ms, head_ms, diff, strict=True)]
    rows = np.flatnonzero(tested)
    if rows.size:
        def pick(s: Series) -> Series:
            return Series(s.counts[rows], s.ms[rows])

        reps = (bootstrap_per_1k(pick(head), h_tokens, rng, settings.replicates)
                - bootstrap_per_1k(pick(base), b_tokens, rng, settings.replicates))
        tail = (1 - settings.confidence) / 2 * 100
        lows, highs = np.percentile(reps, [tail, 100 - tail], axis=1)
        for r, lo, hi in zip(rows, lows, highs, strict=True):
            c = changes[r]
            c.low, c.high = round(float(lo), 3), round(float(hi), 3)
            c.significant = bool(lo > 0 or hi < 0)
    return changes


def stacked(table: dict[Key, Series], keys: list[Key], windows: int) -> Series:
    """[functions, windows] arrays in `keys` order (zeros where a build lacks a function)."""
    zero = Series.zeros(windows)
    rows = [table.get(k, zero) for k in keys]
    return Series(np.array([r.counts for r in rows]).reshape(len(keys), windows),
                  np.array([r.ms for r in rows]).reshape(len(keys), windows))


def one(s: Series) -> Series:
    return Series(s.counts[None, :], s.ms[None, :])


def rank_key(f: FunctionDiff) -> tuple[int, float]:
    s, i = f.self_time, f.inclusive
    if s.significant and s.diff > 0:
        return (0, -s.diff)
    if i.significant and i.diff > 0:
        return (1, -i.diff)
    if s.significant or i.significant:
        return (2, -max(abs(s.diff), abs(i.diff)))
    return (3, -max(abs(s.diff), abs(i.diff)))


def diff_profiles(base: BuildProfile, head: BuildProfile,
                  settings: DiffSettings | None = None) -> ProfileDiff:
    """Diff head against base per function; the method: docs/profile.md."""
    settings = settings or DiffSettings()
    b, h = count_functions(base, settings.basis), count_functions(head, settings.basis)
    if problem := unshared_loop(b, h):
        raise MeasurementError(problem)
    # Seeded from the builds' labels: the same profiles always give the same diff.
    rng = np.random.default_rng(zlib.crc32(f"profile-diff:{base.label}:{head.label}".encode()))
    keys = sorted(set(b.inclusive) | set(h.inclusive))
    floor_ms = settings.min_share * float(per_1k(b.total.ms - b.waiting.ms, b.tokens))
    kb, kh = len(b.tokens), len(h.tokens)
    tokens = (b.tokens, h.tokens)
    self_changes = judge(stacked(b.self_time, keys, kb), stacked(h.self_time, keys, kh),
                         tokens=tokens, floor_ms=floor_ms, settings=settings,
                         rng=rng) if keys else []
    incl_changes = judge(stacked(b.inclusive, keys, kb), stacked(h.inclusive, keys, kh),
                         tokens=tokens, floor_ms=floor_ms, settings=settings,
                         rng=rng) if keys else []
    trunk = trunk_keys(b, h)
    for key, change in zip(keys, incl_changes, strict=True):
        if key in trunk:  # its inclusive change is the total's, reported as the total
            change.low = change.high = None
            change.significant = False
    overall = settings.model_copy(update={"min_rel": 0.0})
    total, waiting = (judge(one(x), one(y), tokens=tokens, floor_ms=0.0, settings=overall,
                            rng=rng)[0]
                      for x, y in ((b.total, h.total), (b.waiting, h.waiting)))
    functions = sorted(
        (FunctionDiff(file=k[0], name=k[1], line=h.lines.get(k) or b.lines.get(k, 0),
                      self_time=s, inclusive=i)
         for k, s, i in zip(keys, self_changes, incl_changes, strict=True)),
        key=rank_key)
    named = [f for f in functions if rank_key(f)[0] < 3]
    others = [f for f in functions if rank_key(f)[0] == 3][:KEEP_INSIGNIFICANT]
    return ProfileDiff(
        base_label=base.label, head_label=head.label, base_source=base.source,
        head_source=head.source, base_windows=len(base.windows), head_windows=len(head.windows),
        base_tokens=round(base.output_tokens, 1), head_tokens=round(head.output_tokens, 1),
        total=total, waiting=waiting, settings=settings,
        method=METHOD.format(basis=settings.basis, conf=settings.confidence,
                             share=settings.min_share, rel=settings.min_rel),
        functions=named + others, notes=profile_notes(base, head) + trunk_note(trunk, total),
    )


# A function on at least this share of both builds' busy samples is the processes' trunk
# (the module, main, the event loop's run_forever): its inclusive time is the total's.
TRUNK_SHARE = 0.9


def trunk_keys(b: Counts, h: Counts) -> set[Key]:
    """The functions under which (nearly) all of both builds' busy time runs. Their inclusive
    change is the whole profile's change; naming them would name every frame between the
    module and the serving loop for one fact the header already states (the total), and a
    machine that got busier during one build's window would read as six findings."""
    def trunk(c: Counts) -> set[Key]:
        busy = float(c.total.ms.sum() - c.waiting.ms.sum())
        return {k for k, s in c.inclusive.items() if busy > 0 and s.ms.sum() >= TRUNK_SHARE * busy}
    return trunk(b) & trunk(h)


def trunk_note(trunk: set[Key], total: Change) -> list[str]:
    if not trunk:
        return []
    names = ", ".join(sorted(name for _, name in trunk)[:4]) + (", ..." if len(trunk) > 4 else "")
    return [f"{len(trunk)} function(s) run under nearly all busy samples of both builds ({names}); "
            f"their inclusive change is the total's ({total.base:.0f} -> {total.head:.0f} ms per "
            f"1k output tokens) and is not tested as their own"]


# A function in at least this share of one build's busy samples is its serving loop (the engine
# core's step, the worker's busy loop): the other build runs it too, under the same name.
LOOP_SHARE = 0.5


def unshared_loop(b: Counts, h: Counts) -> str | None:
    """Why the two profiles cannot be diffed, when one build's serving loop (a function that
    holds half its busy samples) is in the other's under another file name: their files are
    named differently (one build's vllm sits outside site-packages and no source root names
    it), and every function would read as new, the diff printing the whole step as a change.
    A hot function the other build has under no name at all is a real change (a new loop of
    host work), not a defect."""
    for label, mine, other in (("head", h, b), ("base", b, h)):
        busy = float(mine.total.ms.sum() - mine.waiting.ms.sum())
        files_of: dict[str, set[str]] = {}
        for file, name in other.inclusive:
            files_of.setdefault(name, set()).add(file)
        for key, series in sorted(mine.inclusive.items(), key=lambda kv: -kv[1].ms.sum()):
            if series.ms.sum() < LOOP_SHARE * busy:
                break
            file, name = key
            if key not in other.inclusive and name in files_of:
                return (f"the two profiles name the {label}'s serving loop differently: {name} "
                        f"({file}, {series.ms.sum() / busy:.0%} of its busy samples) is in the "
                        f"other build's as {', '.join(sorted(files_of[name]))}; the builds' "
                        f"files are named differently (a vllm outside site-packages needs its "
                        f"folder as a source root)")
    return None


def profile_notes(base: BuildProfile, head: BuildProfile) -> list[str]:
    notes = [f"{p.label}: {n}" for p in (base, head) for n in p.notes]
    if base.rate_hz != head.rate_hz:
        notes.append(f"the builds were sampled at different rates ({base.rate_hz} and "
                     f"{head.rate_hz} Hz); figures are in ms, so they still compare")
    roles = ({p.role for p in base.processes}, {p.role for p in head.processes})
    if roles[0] != roles[1]:
        notes.append(f"the builds ran different processes: base {sorted(roles[0])}, "
                     f"head {sorted(roles[1])}")
    return notes


# --------------------------------------------------------------------------------------------
# The table (plain text, for the terminal and the artifacts)
# --------------------------------------------------------------------------------------------

def _signed(c: Change) -> str:
    mark = " *" if c.significant else ""
    return f"{c.diff:+.1f}{mark}"


def table_rows(diff: ProfileDiff, limit: int) -> list[list[str]]:
    rows = []
    for f in diff.functions[:limit]:
        rows.append([f.name, f.where, f"{f.self_time.base:.1f}", f"{f.self_time.head:.1f}",
                     _signed(f.self_time), f"{f.inclusive.base:.1f}", f"{f.inclusive.head:.1f}",
                     _signed(f.inclusive)])
    return rows


def render_table(diff: ProfileDiff, limit: int = 15, fmt: str = "simple") -> str:
    """The top functions with base and head ms per 1k output tokens; '*' marks a difference
    beyond noise."""
    headers = ["function", "file:line", "self base", "self head", "self diff",
               "incl base", "incl head", "incl diff"]
    named = len(diff.named)
    head = (f"{named} function(s) differ beyond noise ({UNIT}; * = beyond noise; "
            f"total {diff.total.base:.0f} -> {diff.total.head:.0f}, of which spin-waits "
            f"{diff.waiting.base:.0f} -> {diff.waiting.head:.0f})")
    body = tabulate(table_rows(diff, limit), headers=headers, tablefmt=fmt,
                    disable_numparse=True)
    return f"{head}\n{body}"

