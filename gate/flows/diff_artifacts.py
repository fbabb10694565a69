"""A profile diff of two builds, written out: profile-diff.json and its table, the differential
flame graph (diff.folded, diff-flamegraph.svg), the comment's section (where-time.md) and,
given the PR's hunks, their ranking by measured added time (evidence.json).

`gate profile diff` and `gate ab` (after its rounds) both write a diff through `write_diff`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gate.core.files import write_atomic
from gate.evidence.attribution import (
    EVIDENCE_FILE,
    Evidence,
    load_evidence,
    rank_hunks_by_evidence,
    save_evidence,
)
from gate.evidence.hunks import HunkSet
from gate.profile import flamegraph
from gate.profile.data import BuildProfile
from gate.profile.diff import diff_profiles, render_table
from gate.profile.diff_file import (
    PROFILE_DIFF_FILE,
    DiffSettings,
    ProfileDiff,
    load_profile_diff,
    save_profile_diff,
)
from gate.profile.sampling import SPEEDSCOPE_FILE
from gate.report.where_time import render_where_time

SECTION_FILE = "where-time.md"
TABLE_FILE = "profile-diff.txt"


@dataclass(frozen=True)
class WrittenDiff:
    diff: ProfileDiff
    evidence: Evidence | None
    table: str


@dataclass(frozen=True)
class ProfilePair:
    """The two builds' profiles, and the folders they were read from (their speedscope files
    are linked from the diff when there)."""

    base: BuildProfile
    head: BuildProfile
    base_dir: Path | None = None
    head_dir: Path | None = None


def write_diff(pair: ProfilePair, out: Path, settings: DiffSettings, *,
               hunkset: HunkSet | None = None, repo: Path | None = None,
               top: int = 15) -> WrittenDiff:
    """Diff the head's profile against the base's and write every artifact under `out`."""
    base, head, base_dir, head_dir = pair.base, pair.head, pair.base_dir, pair.head_dir
    diff = diff_profiles(base, head, settings)
    out.mkdir(parents=True, exist_ok=True)
    b, h = flamegraph.folded(base, settings.basis), flamegraph.folded(head, settings.basis)
    write_atomic(out / "diff.folded", flamegraph.diff_folded_text(b, h))
    title = f"{head.label} vs {base.label}: differential flame graph (per 1k output tokens)"
    write_atomic(out / "diff-flamegraph.svg", flamegraph.render_svg(b, h, title))
    diff.artifacts = {"diff_folded": str(out / "diff.folded"),
                      "flamegraph_svg": str(out / "diff-flamegraph.svg")}
    for side, folder in (("base", base_dir), ("head", head_dir)):
        if folder is not None and (folder / SPEEDSCOPE_FILE).is_file():
            diff.artifacts[f"{side}_speedscope"] = str(folder / SPEEDSCOPE_FILE)
    evidence = None
    if hunkset is not None:
        evidence = rank_hunks_by_evidence(hunkset, diff, repo or Path(hunkset.repo))
        diff.artifacts["evidence"] = str(save_evidence(evidence, out / EVIDENCE_FILE))
    else:  # an evidence.json of an earlier diff in this folder ranks hunks against other data
        (out / EVIDENCE_FILE).unlink(missing_ok=True)
    write_atomic(out / SECTION_FILE, render_where_time(diff, evidence))
    diff.artifacts["section"] = str(out / SECTION_FILE)
    table = render_table(diff, top)
    write_atomic(out / TABLE_FILE, table + "\n")
    save_profile_diff(diff, out / PROFILE_DIFF_FILE)
    return WrittenDiff(diff, evidence, table)


def load_written(folder: Path) -> tuple[ProfileDiff, Evidence | None]:
    """A folder `write_diff` wrote: its diff, and its evidence when hunks were ranked."""
    evidence_path = folder / EVIDENCE_FILE
    evidence = load_evidence(evidence_path) if evidence_path.is_file() else None
    return load_profile_diff(folder), evidence
