"""Publish a verdict: sticky PR comment, job summary, step outputs, annotations, comment file.

The sticky comment is found again by a hidden marker, `<!-- vllm-structured-output-gate:ID -->`
(ID "default" unless a matrix gives each aggregation its own), on any page of the PR's
comments, and updated in place. A second hidden tag records the outcome it showed; when the
verdict turns to fail from anything else, a NEW comment is posted so that people are notified
(an edit notifies no one).

Where the gate may not comment (a fork PR's read-only token, a workflow without
`pull-requests: write`, no PR number, `--no-comment`), the body and PR number go to a JSON
file for the comment-poster workflow; publishing never changes the verdict's exit code.
"""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gate.errors import GateError
from gate.files import load_json_model
from gate.github import GitHubClient, GitHubError, GitHubForbidden
from gate.hunks import Hunk, HunkSet, load_hunks
from gate.runner_output import workflow_command
from gate.settings import Settings, check_marker_id
from gate.verdict import SEVERITY, Outcome, Verdict, load_verdict

MARKER_PREFIX = "vllm-structured-output-gate"
MAX_COMMENT_CHARS = 65_536  # GitHub's limit on a comment body
BODY_BUDGET = 65_000  # what we allow ourselves, leaving room for GitHub's own accounting
OUTCOME_RE = re.compile(rf"<!-- {MARKER_PREFIX}-outcome:([a-z]+) -->")
MAX_ANNOTATIONS = 5

ClientFactory = Callable[[Settings], GitHubClient]


def marker(marker_id: str) -> str:
    return f"<!-- {MARKER_PREFIX}:{check_marker_id(marker_id)} -->"


def render_body(report: str, outcome: Outcome, marker_id: str, run_url: str | None = None) -> str:
    """The comment: marker, outcome tag, the report (trimmed if it must be), a footer."""
    head = f"{marker(marker_id)}\n<!-- {MARKER_PREFIX}-outcome:{outcome.value} -->\n"
    footer = f"\n\n<sub>[gate run]({run_url})</sub>\n" if run_url else "\n"
    room = BODY_BUDGET - len(head) - len(footer)
    if len(report) > room:
        note = "\n\n… report trimmed to fit a GitHub comment; the full report is in the job summary and the artifact.\n"
        cut = report[: room - len(note) - 4]
        if cut.count("```") % 2:  # never leave a code fence open
            cut += "\n```"
        report = cut + note
    body = head + report.rstrip("\n") + footer
    assert len(body) < MAX_COMMENT_CHARS, len(body)
    return body


def outcome_of(body: str) -> str | None:
    match = OUTCOME_RE.search(body or "")
    return match.group(1) if match else None


def find_sticky(comments: list[dict], marker_id: str) -> dict | None:
    """The most recent comment carrying this marker (after a turn to fail there are two)."""
    tag = marker(marker_id)
    found = [c for c in comments if tag in (c.get("body") or "")]
    return found[-1] if found else None


@dataclass
class Posted:
    action: str  # created, updated, created-on-fail
    comment_id: int
    url: str


def post_sticky(client: GitHubClient, pr: int, body: str, marker_id: str, outcome: str) -> Posted:
    previous = find_sticky(client.list_comments(pr), marker_id)
    turned_fail = outcome == Outcome.FAIL.value and (
        previous is None or outcome_of(previous["body"]) != Outcome.FAIL.value
    )
    if previous is not None and not turned_fail:
        comment = client.update_comment(previous["id"], body)
        return Posted("updated", comment["id"], comment.get("html_url", ""))
    comment = client.create_comment(pr, body)
    action = "created-on-fail" if previous is not None else "created"
    return Posted(action, comment["id"], comment.get("html_url", ""))


# -- the comment file, the hand-over to the comment-poster workflow -----------------------
class CommentFile(BaseModel):
    """gate-comment.json. Produced on the measuring runner, so untrusted when read back."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    pr: int | None = Field(None, gt=0, description="None when the run had no PR number")
    marker_id: str = "default"
    outcome: Outcome
    body: str = Field(max_length=MAX_COMMENT_CHARS - 1)
    reason: str = Field("", description="why the comment was not posted directly")

    @field_validator("pr", mode="before")
    @classmethod
    def _strict_int(cls, value: object) -> object:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError("pr must be a JSON integer")
        return value

    @field_validator("marker_id")
    @classmethod
    def _marker(cls, value: str) -> str:
        try:
            return check_marker_id(value)
        except GateError as exc:
            raise ValueError(str(exc)) from None


def load_comment_file(path: Path) -> CommentFile:
    return load_json_model(CommentFile, path, "comment file")


# -- GitHub Actions files and workflow commands -------------------------------------------
def append_summary(path: Path | None, report: str) -> None:
    if path is None:
        return
    with path.open("a", encoding="utf-8") as fh:
        fh.write(report.rstrip("\n") + "\n\n")


def write_outputs(path: Path | None, values: dict[str, str]) -> None:
    """Append to GITHUB_OUTPUT in the heredoc form, which is safe for any value."""
    if path is None:
        return
    with path.open("a", encoding="utf-8") as fh:
        for name, value in values.items():
            delimiter = f"ghadelimiter_{uuid.uuid4()}"
            while delimiter in value:  # pragma: no cover - astronomically unlikely
                delimiter = f"ghadelimiter_{uuid.uuid4()}"
            fh.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def rank_hunks(hunks: list[Hunk]) -> list[Hunk]:
    """Mechanism-tagged hunks first, then by score; deletions have no head line to mark."""
    shown = [h for h in hunks if h.change not in ("deleted", "binary")]
    return sorted(shown, key=lambda h: (not h.mechanisms, -h.score))


def annotations(
    hunkset: HunkSet, verdict: Verdict, prefix: str = "", limit: int = MAX_ANNOTATIONS
) -> list[str]:
    lines = []
    for rank, hunk in enumerate(rank_hunks(hunkset.hunks)[:limit], start=1):
        start = max(hunk.new_start, 1)
        end = max(start, hunk.new_start + hunk.new_lines - 1)
        why = (
            f"touches {', '.join(hunk.mechanisms)}" if hunk.mechanisms else "in a watched hot path"
        )
        title = f"Structured-output perf gate: {verdict.outcome.value} (suspect #{rank})"
        message = f"{verdict.headline}\nThis hunk {why}."
        if hunk.section:
            message += f"\nIn: {hunk.section}"
        props = {
            "file": prefix + hunk.path,
            "line": str(start),
            "endLine": str(end),
            "title": title,
        }
        rendered = ",".join(f"{k}={escape_property(v)}" for k, v in props.items())
        lines.append(f"::warning {rendered}::{escape_data(message)}")
    return lines


# -- several runners, one comment ---------------------------------------------------------
def combine(reports: list[str], verdicts: list[Verdict], labels: list[str]) -> tuple[str, Verdict]:
    """One report for a matrix: the worst verdict's line first, then each runner's report
    under its label, each trimmed to its share of the comment budget."""
    if len(labels) != len(reports):
        raise GateError("give one --label per --report")
    order = [o.value for o in SEVERITY]
    worst_i = min(range(len(verdicts)), key=lambda i: order.index(verdicts[i].outcome.value))
    worst = verdicts[worst_i]
    head = f"**{worst.headline}** (worst of {len(reports)}: {labels[worst_i]})\n"
    share = (BODY_BUDGET - 2_000) // len(reports)
    parts = [head]
    for label, text in zip(labels, reports, strict=True):
        parts.append(f"\n---\n\n### {_escape_md(label)}\n\n{_trim(text, share)}")
    return "".join(parts), worst


def _trim(text: str, room: int) -> str:
    if len(text) <= room:
        return text.rstrip("\n") + "\n"
    note = "\n\n… trimmed; the full report is in this runner's artifact.\n"
    cut = text[: room - len(note) - 4]
    if cut.count("```") % 2:
        cut += "\n```"
    return cut + note


def _escape_md(text: str) -> str:
    return re.sub(r"([\\`*_{}\[\]<>()#+!|~-])", r"\\\1", " ".join(text.split()))[:100]


# -- the command -------------------------------------------------------------------------
def default_client(settings: Settings) -> GitHubClient:
    return GitHubClient(settings.api_url, settings.repository or "", settings.github_token)


def publish(
    settings: Settings,
    report_path: Path | list[Path],
    verdict_path: Path | list[Path],
    hunks_path: Path | None = None,
    *,
    labels: list[str] | None = None,
    client_factory: ClientFactory = default_client,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    reports = report_path if isinstance(report_path, list) else [report_path]
    verdict_paths = verdict_path if isinstance(verdict_path, list) else [verdict_path]
    verdicts = [load_verdict(p) for p in verdict_paths]
    texts = [_read_report(p) for p in reports]
    if len(texts) != len(verdicts):
        raise GateError("give one --verdict per --report")
    if len(texts) == 1:
        report, verdict = texts[0], verdicts[0]
    else:
        report, verdict = combine(texts, verdicts, labels or [p.parent.name for p in reports])
    body = render_body(report, verdict.outcome, settings.marker_id, settings.run_url)
    append_summary(settings.step_summary, report)
    if verdict.outcome == Outcome.FAIL and hunks_path is not None:
        for line in annotations(load_hunks(hunks_path), verdict, settings.path_prefix):
            workflow_command(out, line)
    outputs = {
        "verdict": verdict.outcome.value,
        "exit-code": str(verdict.exit_code),
        "headline": verdict.headline,
        "verdict-path": "\n".join(str(p) for p in verdict_paths),
        "report-path": "\n".join(str(p) for p in reports),
    }
    posted, reason = _try_comment(settings, body, verdict.outcome.value, client_factory, err)
    if posted:
        outputs.update({"comment-url": posted.url, "comment-action": posted.action})
        print(f"gate publish: comment {posted.action} ({posted.url})", file=err)
    else:
        handover = CommentFile(
            pr=settings.pr_number,
            marker_id=settings.marker_id,
            outcome=verdict.outcome,
            body=body,
            reason=reason,
        )
        _write_json(settings.comment_file, handover.model_dump_json(indent=1))
        outputs.update({"comment-file": str(settings.comment_file), "comment-action": "file"})
        print(f"gate publish: {reason}; comment written to {settings.comment_file}", file=err)
    write_outputs(settings.output, outputs)
    return verdict.exit_code


def _try_comment(settings, body, outcome, client_factory, err) -> tuple[Posted | None, str]:
    if not settings.comment:
        return None, "commenting is off (--no-comment)"
    if settings.pr_number is None:
        return None, "no pull request number in this event"
    if settings.github_token is None or not settings.repository:
        return None, "no GitHub token or repository"
    client = client_factory(settings)
    try:
        return post_sticky(client, settings.pr_number, body, settings.marker_id, outcome), ""
    except GitHubForbidden as exc:
        workflow_command(err, f"::notice title=Perf gate::{escape_data(str(exc))}")
        return None, "no permission to comment (fork PR or read-only token)"
    except GitHubError as exc:
        workflow_command(err, f"::warning title=Perf gate::{escape_data(str(exc))}")
        return None, "commenting failed"


def post_comment_file(
    settings: Settings,
    path: Path,
    *,
    pr: int | None = None,
    expect_head_sha: str | None = None,
    client_factory: ClientFactory = default_client,
    err: TextIO | None = None,
) -> int:
    """The comment-poster workflow's half: post a comment file written by a measuring run.
    The file came from a run of PR code, so the PR number is checked against the PR whose
    head commit the triggering run measured (`expect_head_sha`)."""
    err = err or sys.stderr
    handover = load_comment_file(path)
    number = pr if pr is not None else handover.pr
    if number is None:
        raise GateError(f"{path} names no pull request and --pr was not given")
    if handover.pr is not None and pr is not None and handover.pr != pr:
        raise GateError(f"{path} is for PR #{handover.pr}, not #{pr}")
    if settings.github_token is None or not settings.repository:
        raise GateError("posting a comment file needs GITHUB_TOKEN and GITHUB_REPOSITORY")
    client = client_factory(settings)
    if expect_head_sha:
        head = (client.pull_request(number).get("head") or {}).get("sha")
        if head != expect_head_sha:
            raise GateError(
                f"PR #{number}'s head is {head}, not the measured commit {expect_head_sha}: "
                "refusing to post"
            )
    body = render_body(_strip_tags(handover.body), handover.outcome, handover.marker_id)
    posted = post_sticky(client, number, body, handover.marker_id, handover.outcome.value)
    print(f"gate publish: comment {posted.action} on PR #{number} ({posted.url})", file=err)
    write_outputs(settings.output, {"comment-url": posted.url, "comment-action": posted.action})
    return 0


def _strip_tags(body: str) -> str:
    """Drop our own hidden tags (they are re-rendered from validated fields)."""
    return re.sub(rf"<!-- {MARKER_PREFIX}[^>]*-->\n?", "", body)


def _read_report(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GateError(f"cannot read report {path}: {exc.strerror}") from None


def _write_json(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n", encoding="utf-8")
