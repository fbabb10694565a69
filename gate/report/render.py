"""`gate report` and the PR comment: verdict.json + results.json (+ hunks.json) -> one markdown
document, laid out by gate/report/templates/comment.md.j2.

Order: the verdict in one line, the checks table, the guided/free table per concurrency and
the drain, a throughput chart, environment warnings, errors and advice, run info, then the
diff hunks in collapsible sections, ranked first. The job-summary report and the PR comment
are the same document; the comment adds its hidden marker and outcome tags and a run link.
Both fit a budget (GitHub's 65,536-character comment limit) by whole sections and hunks
(gate.report.fit); every untrusted string is escaped by the template (gate.report.template).
All functions here are pure; I/O lives in gate.cli.report and gate.github.publish.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from markupsafe import Markup

from gate import __version__
from gate.core.settings import check_marker_id
from gate.evidence.attribution import Evidence
from gate.evidence.hunks import HunkSet
from gate.judge.looks import Trajectory
from gate.judge.verdict import Outcome, Verdict
from gate.measure.results import Results
from gate.profile.diff_file import ProfileDiff
from gate.report.fit import Document, Frame, fit
from gate.report.view import DEFAULT_TITLE, RunInput, run_view

GITHUB_COMMENT_LIMIT = 65_536
MARKER_PREFIX = "vllm-structured-output-gate"
_RUN_URL = re.compile(r"https?://[A-Za-z0-9.:-]+/[A-Za-z0-9_./-]+")


def comment_marker(marker_id: str) -> str:
    """The hidden first line that identifies the sticky comment (one per marker id)."""
    return f"<!-- {MARKER_PREFIX}:{check_marker_id(marker_id)} -->"


def outcome_tag(outcome: Outcome) -> str:
    """The hidden second line: the outcome the comment shows (a turn to fail posts anew)."""
    return f"<!-- {MARKER_PREFIX}-outcome:{outcome.value} -->"


@dataclass(frozen=True, kw_only=True)
class ReportInput:
    """One run's report as `gate report` writes it: the run, and the characters it may take."""

    verdict: Verdict
    head: Results | None = None
    base: Results | None = None
    hunks: HunkSet | None = None
    title: str = DEFAULT_TITLE
    max_chars: int = GITHUB_COMMENT_LIMIT
    chart_series: dict | None = None
    chart_name: str | None = None
    chart_note: str | None = None
    profile_diff: ProfileDiff | None = None
    evidence: Evidence | None = None
    history: dict[str, list[float]] | None = None  # check -> its nights on the default branch
    trajectories: list[Trajectory] | None = None  # the A/B's sequential test, look by look

    def run_input(self) -> RunInput:
        return RunInput(verdict=self.verdict, head=self.head, base=self.base, hunks=self.hunks,
                        title=self.title, chart_series=self.chart_series,
                        chart_name=self.chart_name, chart_note=self.chart_note,
                        profile_diff=self.profile_diff, evidence=self.evidence,
                        history=self.history, trajectories=self.trajectories)


def document(runs: list[RunInput], limit: int, frame: Frame | None = None) -> Document:
    return Document([run_view(r) for r in runs], Markup(f"{limit:,}"), Markup(__version__), frame)


def hunk_sets(runs: list[RunInput]) -> dict[int, HunkSet]:
    return {i: hs for i, r in enumerate(runs) if (hs := r.ranked_hunks()) is not None}


def render_runs(runs: list[RunInput], budget: int = GITHUB_COMMENT_LIMIT) -> str:
    """The report (no hidden tags) of one run, or of a matrix's labelled runs."""
    return fit(document(runs, budget), hunk_sets(runs), budget)


def render_report(ri: ReportInput) -> str:
    """The job-summary / artifact report, at most `ri.max_chars` characters."""
    return render_runs([ri.run_input()], ri.max_chars)


def render_comment(runs: list[RunInput], marker_id: str, run_url: str | None = None,
                   budget: int = GITHUB_COMMENT_LIMIT) -> str:
    """The sticky PR comment for one run, or a matrix's runs (each with a `label`): hidden
    marker and outcome tags, the report(s), a run link; at most `budget` characters."""
    if not runs:
        raise ValueError("a comment needs at least one run")
    outcome = document(runs, budget).outcome
    url = Markup(run_url) if run_url and _RUN_URL.fullmatch(run_url) else None
    frame = Frame(Markup(comment_marker(marker_id)), Markup(outcome_tag(outcome)), url)
    return fit(document(runs, budget, frame), hunk_sets(runs), budget)
