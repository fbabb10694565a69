"""Publish a verdict: sticky PR comment, job summary, step outputs, annotations, comment file.

The comment is always rendered here, from the validated verdict, results and hunks, through
the same template and escaping as `gate report` (gate.report.render.render_comment), and fitted to
GitHub's 65,536 characters there; nothing here cuts text.

The sticky comment is the latest comment on the PR that (a) was written by the token's own
identity (`identify`: GET /user, or github-actions[bot] for an installation token, or
--bot-login) and (b) starts with the hidden marker `<!-- vllm-structured-output-gate:ID -->`.
Anyone else's comment carrying the marker is ignored: it is never edited, and it neither
blocks our comment nor hides a turn to fail. The second hidden line records the outcome
shown; when the verdict turns to fail from anything else a NEW comment is posted so that
people are notified (an edit notifies no one).

Where the gate may not comment (a fork PR's read-only token, a workflow without
`pull-requests: write`, no PR number, `--no-comment`), the verdict, results and hunks (not a
body) go to a JSON comment file for the comment-poster workflow, which re-renders the comment
itself: the measuring job ran PR code, so no text of its own reaches the PR. Publishing never
changes the verdict's exit code.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from gate.core.errors import GateError
from gate.core.files import load_json_model, write_atomic
from gate.core.settings import Settings
from gate.evidence.bisect_record import BisectResult
from gate.evidence.hunks import Hunk, HunkSet
from gate.github.client import (
    DEFAULT_MAX_WAIT_S,
    GITHUB_ACTIONS_LOGIN,
    GitHubClient,
    GitHubError,
    GitHubForbidden,
    GitHubWriteUnknown,
    RetryPolicy,
)
from gate.github.comment_file import (
    CommentFile,
    CommentRun,
    load_comment_file,
    slim,
    with_acknowledgements,
    worst_verdict,
)
from gate.github.workflow_commands import (
    escape_data,
    format_command,
    workflow_command,
    write_outputs,
)
from gate.judge.verdict import Outcome, Verdict
from gate.report.bisect import render_bisect
from gate.report.render import (
    GITHUB_COMMENT_LIMIT,
    MARKER_PREFIX,
    comment_marker,
    render_comment,
    render_runs,
)

MAX_COMMENT_CHARS = GITHUB_COMMENT_LIMIT  # GitHub's limit on a comment body
CREATE_ATTEMPTS = 3
MAX_ANNOTATIONS = 5

ClientFactory = Callable[[Settings], GitHubClient]


def marker(marker_id: str) -> str:
    return comment_marker(marker_id)


# -- finding our comment ------------------------------------------------------------------
def outcome_of(body: str) -> str | None:
    """The outcome our comment shows: its second line, and only there."""
    lines = (body or "").split("\n", 2)
    prefix, suffix = f"<!-- {MARKER_PREFIX}-outcome:", " -->"
    if len(lines) < 2 or not (lines[1].startswith(prefix) and lines[1].endswith(suffix)):
        return None
    value = lines[1][len(prefix) : -len(suffix)]
    return value if value in {o.value for o in Outcome} else None


def is_ours(comment: dict, marker_id: str, login: str) -> bool:
    """Written by `login` and starting with this marker: a marker quoted or planted anywhere
    else (a user's comment, a hunk shown in another comment) does not count."""
    author = (comment.get("user") or {}).get("login")
    return author == login and (comment.get("body") or "").startswith(marker(marker_id) + "\n")


def find_sticky(comments: list[dict], marker_id: str, login: str) -> dict | None:
    """Our most recent comment with this marker (after a turn to fail there are two)."""
    found = [c for c in comments if is_ours(c, marker_id, login)]
    return found[-1] if found else None


@dataclass(frozen=True)
class Identity:
    login: str
    source: str


def identify(client: GitHubClient, bot_login: str | None = None) -> Identity:
    """Whose comments are ours. --bot-login wins; else GET /user names a user or app-user
    token; an installation token gets 403 there, and GITHUB_TOKEN's comments are written by
    github-actions[bot] (a GitHub App's installation token needs --bot-login APP[bot])."""
    if bot_login:
        return Identity(bot_login, "--bot-login")
    login = client.authenticated_login()
    if login:
        return Identity(login, "GET /user")
    return Identity(GITHUB_ACTIONS_LOGIN, "installation token (GET /user is 403): GITHUB_TOKEN")


@dataclass
class Posted:
    action: str  # created, updated, created-on-fail
    comment_id: int
    url: str
    author: str | None


def create_once(client: GitHubClient, pr: int, *, body: str, marker_id: str, login: str,
                seen: set[int]) -> dict:
    """POST the comment. A POST that got a 5xx or no answer may still have landed: list the
    comments again and take ours if it did, so that one 502 never makes two comments."""
    for attempt in range(CREATE_ATTEMPTS):
        try:
            return client.create_comment(pr, body)
        except GitHubWriteUnknown as exc:
            last = exc
            client.backoff(attempt, str(exc))
            landed = [c for c in client.list_comments(pr)
                      if c.get("id") not in seen and is_ours(c, marker_id, login)]
            if landed:
                return landed[-1]
    raise GitHubError(f"could not create the comment after {CREATE_ATTEMPTS} tries: {last}")


def post_sticky(client: GitHubClient, pr: int, *, body: str, marker_id: str, outcome: str,
                identity: Identity) -> Posted:
    comments = client.list_comments(pr)
    previous = find_sticky(comments, marker_id, identity.login)
    turned_fail = outcome == Outcome.FAIL.value and (
        previous is None or outcome_of(previous["body"]) != Outcome.FAIL.value
    )
    if previous is not None and not turned_fail:
        comment = client.update_comment(previous["id"], body)
        action = "updated"
    else:
        seen = {int(c["id"]) for c in comments if "id" in c}
        comment = create_once(client, pr, body=body, marker_id=marker_id, login=identity.login,
                              seen=seen)
        action = "created-on-fail" if previous is not None else "created"
    author = (comment.get("user") or {}).get("login")
    return Posted(action, comment["id"], comment.get("html_url", ""), author)


# -- GitHub Actions files and workflow commands -------------------------------------------
def append_summary(path: Path | None, report: str) -> None:
    if path is None:
        return
    with path.open("a", encoding="utf-8") as fh:
        fh.write(report.rstrip("\n") + "\n\n")




def annotatable(hunks: list[Hunk]) -> list[Hunk]:
    """The hunks in the report's order (gate.evidence.attribution.apply_evidence: measured
    evidence first, then by score), less deletions, which have no head line to mark."""
    return [h for h in hunks if h.change not in ("deleted", "binary")]


def hunk_annotations(
    hunkset: HunkSet, verdict: Verdict, prefix: str = "", limit: int = MAX_ANNOTATIONS
) -> list[str]:
    lines = []
    for rank, hunk in enumerate(annotatable(hunkset.hunks)[:limit], start=1):
        start = max(hunk.new_start, 1)
        end = max(start, hunk.new_start + hunk.new_lines - 1)
        why = (
            f"changes a function that takes longer: {hunk.evidence}" if hunk.evidence else
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
        lines.append(format_command("warning", message, **props))
    return lines


# -- the command -------------------------------------------------------------------------
def default_client(settings: Settings, max_wait_s: float = DEFAULT_MAX_WAIT_S) -> GitHubClient:
    return GitHubClient(settings.api_url, settings.repository or "", settings.github_token,
                        retry=RetryPolicy(max_wait_s=max_wait_s))


@dataclass(frozen=True)
class PublishOptions:
    summary: str | None = None  # the job summary's text (report.md); default: the comment's
    bot_login: str | None = None
    outputs: dict[str, str] | None = None  # extra step outputs (paths)


def publish(
    settings: Settings,
    runs: list[CommentRun],
    options: PublishOptions | None = None,
    *,
    client_factory: ClientFactory = default_client,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    options = options or PublishOptions()
    verdict = worst_verdict([r.verdict for r in runs])
    inputs = [r.run_input() for r in runs]
    body = render_comment(inputs, settings.marker_id, settings.run_url)
    append_summary(settings.step_summary, options.summary or render_runs(inputs))
    ranked = inputs[0].ranked_hunks() if len(runs) == 1 else None
    if verdict.outcome == Outcome.FAIL and ranked is not None:
        for line in hunk_annotations(ranked, verdict, settings.path_prefix):
            workflow_command(out, line)
    outputs = {"verdict": verdict.outcome.value, "exit-code": str(verdict.exit_code),
               "headline": verdict.headline, "watched-changed": watched_changed(runs),
               **(options.outputs or {})}
    posted, reason = _try_comment(settings, body, outcome=verdict.outcome.value,
                                  bot_login=options.bot_login, client_factory=client_factory,
                                  err=err)
    if posted:
        outputs.update({"comment-url": posted.url, "comment-action": posted.action})
        print(f"gate publish: comment {posted.action} ({posted.url})", file=err)
    else:
        handover = CommentFile(pr=settings.pr_number, marker_id=settings.marker_id,
                               runs=[r.model_copy(update={"head": slim(r.head),
                                                          "base": slim(r.base)}) for r in runs],
                               reason=reason)
        write_atomic(settings.comment_file, handover.model_dump_json(indent=1) + "\n")
        outputs.update({"comment-file": str(settings.comment_file), "comment-action": "file"})
        print(f"gate publish: {reason}; comment data written to {settings.comment_file}",
              file=err)
    write_outputs(settings.output, outputs)
    return verdict.exit_code


def watched_changed(runs: list[CommentRun]) -> str:
    """Whether the measured change touched a watched hot path: "true", "false", or "unknown"
    (no hunks were listed). The action fails an undecided verdict only where it is not
    "false": a change outside the hot paths that screening found nothing gross in is not held
    up, one inside them is never passed undecided."""
    if any(r.hunks is None for r in runs):
        return "unknown"
    return "true" if any(r.hunks.files_watched for r in runs if r.hunks) else "false"


def _try_comment(settings, body, *, outcome, bot_login, client_factory, err):
    if not settings.comment:
        return None, "commenting is off (--no-comment)"
    if settings.pr_number is None:
        return None, "no pull request number in this event"
    if settings.github_token is None or not settings.repository:
        return None, "no GitHub token or repository"
    try:
        client = client_factory(settings)
        identity = identify(client, bot_login)
        posted = post_sticky(client, settings.pr_number, body=body, marker_id=settings.marker_id,
                             outcome=outcome, identity=identity)
    except GitHubForbidden as exc:
        workflow_command(err, f"::notice title=Perf gate::{escape_data(str(exc))}")
        return None, "no permission to comment (fork PR or read-only token)"
    except GitHubError as exc:
        workflow_command(err, f"::warning title=Perf gate::{escape_data(str(exc))}")
        return None, "commenting failed"
    _check_author(posted, identity, err)
    return posted, ""


def _check_author(posted: Posted, identity: Identity, err: TextIO) -> None:
    """Learn from the comment just written: if GitHub wrote it as someone else than we
    assumed (a GitHub App's installation token), later runs would not find it."""
    if posted.author and posted.author != identity.login:
        text = (f"the comment was written as {posted.author}, not {identity.login} "
                f"({identity.source}); pass --bot-login {posted.author} so that later runs "
                "update it instead of adding another")
        workflow_command(err, f"::warning title=Perf gate::{escape_data(text)}")


@dataclass(frozen=True)
class PostTarget:
    """What the poster workflow itself knows: its PR and the commit the measuring run checked
    out. A hand-over file that names another PR, or a PR whose head moved on, is refused."""

    pr: int | None = None
    expect_head_sha: str | None = None
    history: Path | None = None  # its own copy of the history: the acknowledgements it applies


def poster_pr(given: int | None, from_run: int | None) -> int:
    """The PR a comment file is posted on: --pr, else the run's own (event payload, CI);
    never a number the file itself names (a run of PR code wrote it)."""
    if given is not None and from_run is not None and given != from_run:
        raise GateError(f"--pr {given} is not this run's PR #{from_run}: refusing to post")
    number = given if given is not None else from_run
    if number is None:
        raise GateError("no pull request to post on: pass --pr (the comment file's own PR "
                        "number is not taken: a run of the PR's code wrote it)")
    return number


def post_comment_file(
    settings: Settings,
    path: Path,
    *,
    target: PostTarget | None = None,
    bot_login: str | None = None,
    client_factory: ClientFactory = default_client,
    err: TextIO | None = None,
) -> int:
    """The comment-poster workflow's half. The file came from a run of PR code: it is
    validated field by field, its PR number and marker id must be the workflow's own (`pr`,
    settings.marker_id), the PR's head must be the commit the triggering run measured
    (`expect_head_sha`), an acknowledgement the verdict claims must be in the poster's own
    history (`target.history`, whose acknowledgements of that head it applies), and the comment
    is rendered here from the verdict, results and hunks, exactly as `gate publish` renders it.

    The PR is the poster's own: `target.pr` (--pr), else the one its event or CI names
    (settings.pr_number: the event payload, GATE_PR_NUMBER, BUILDKITE_PULL_REQUEST), never
    the file's; the two must agree when both are known."""
    err = err or sys.stderr
    target = target or PostTarget()
    expect_head_sha = target.expect_head_sha
    handover = load_comment_file(path)
    number = poster_pr(target.pr, settings.pr_number)
    if handover.pr is not None and handover.pr != number:
        raise GateError(f"{path} is for PR #{handover.pr}, not #{number}: refusing to post")
    if handover.marker_id != settings.marker_id:
        raise GateError(
            f"{path} is for the comment {handover.marker_id!r}, not this workflow's "
            f"{settings.marker_id!r} (--marker-id): refusing to post"
        )
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
    handover = with_acknowledgements(handover, target.history, pr=number,
                                     head_sha=expect_head_sha, repository=settings.repository or "")
    body = render_comment([r.run_input() for r in handover.runs], settings.marker_id)
    identity = identify(client, bot_login)
    posted = post_sticky(client, number, body=body, marker_id=settings.marker_id,
                         outcome=handover.outcome.value, identity=identity)
    _check_author(posted, identity, err)
    print(f"gate publish: comment {posted.action} on PR #{number} ({posted.url})", file=err)
    write_outputs(settings.output, {"comment-url": posted.url, "comment-action": posted.action})
    return 0


def post_bisect_report(settings: Settings, path: Path, issue: int, *,
                       client_factory: ClientFactory = default_client) -> int:
    """The bisect workflow's `report` job: bisect.json came from a job that ran the measured
    code, so it is read as typed data (every commit a git SHA, unknown keys refused) and the
    report rendered here, escaped like the PR comment, then posted as a new comment on
    `issue`. The bisect's own bisect.md is never posted."""
    if issue <= 0:
        raise GateError(f"--issue {issue} is not an issue number")
    if settings.github_token is None or not settings.repository:
        raise GateError("posting on an issue needs GITHUB_TOKEN and GITHUB_REPOSITORY")
    body = render_bisect(load_json_model(BisectResult, path, "bisect result"))
    posted = client_factory(settings).create_comment(issue, body)
    print(f"gate publish: bisect report posted on issue #{issue} ({posted.get('html_url')})",
          file=sys.stderr)
    return 0
