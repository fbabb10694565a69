"""One GitHub issue per change point on the default branch: created once, updated as nights
come in, closed when the level recovers (or the slowdown turns out acknowledged), and the
bisect over its range dispatched when it is created (docs/history.md, "Alerts").

An issue is ours when the token's own identity opened it and its body starts with the
series' hidden marker (gate.report.alert): anyone can paste a marker, so an issue someone
else wrote is never edited or closed. The second hidden line records the change point's
range; a change point found again one night off (its position can move as nights come in)
updates the same open issue. A POST whose fate is unknown (5xx, no answer) is looked for in
the list before it is sent again, so one 502 never makes two issues.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gate.github.client import GitHubClient, GitHubError, GitHubWriteUnknown
from gate.history.model import ChangePoint, Series, SeriesDetection
from gate.report.alert import GONE, MARKER, Bisect, issue_body, issue_title

_RANGE = re.compile(rf"^<!-- {re.escape(MARKER)}-range:([0-9a-f]+|unknown)\.\.([0-9a-f]+|unknown) -->$")
NEAR_NIGHTS = 2  # a change point this close to an open issue's is the same one, moved
CREATE_ATTEMPTS = 3


@dataclass(frozen=True, kw_only=True)
class AlertIssue:
    number: int
    state: str
    series_key: str
    last_good: str
    first_bad: str
    body: str


def parse_issue(issue: dict[str, Any], author: str) -> AlertIssue | None:
    """The alert issue's identity, or None when it is not one of ours."""
    body = issue.get("body") or ""
    user = (issue.get("user") or {}).get("login")
    lines = body.split("\n", 2)
    if user != author or len(lines) < 2:
        return None
    prefix, suffix = f"<!-- {MARKER}:", " -->"
    if not (lines[0].startswith(prefix) and lines[0].endswith(suffix)):
        return None
    found = _RANGE.match(lines[1])
    if not found:
        return None
    return AlertIssue(number=int(issue["number"]), state=str(issue.get("state")),
                      series_key=lines[0][len(prefix):-len(suffix)], last_good=found.group(1),
                      first_bad=found.group(2), body=body)


@dataclass
class AlertsSynced:
    """What sync_alerts did: the issues it created, updated, closed and dispatched a bisect for."""

    created: list[int] = field(default_factory=list)
    updated: list[int] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    dispatched: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AlertSettings:
    server_url: str
    workflow: str = "gate-bisect.yml"
    ref: str = "main"
    bisect_plan: str | None = None  # default: the series' plan
    dispatch: bool = True


def _index_of(series: Series, commit: str) -> int | None:
    for i, p in enumerate(series.points):
        if p.commit == commit or (len(commit) >= 7 and p.commit.startswith(commit)):
            return i
    return None


def _match(issues: list[AlertIssue], sd: SeriesDetection, *, cp: ChangePoint, series: Series,
           taken: set[int]) -> AlertIssue | None:
    mine = [i for i in issues if i.series_key == sd.key and i.number not in taken]
    for i in mine:
        if cp.first_bad.startswith(i.first_bad) or i.first_bad.startswith(cp.first_bad):
            return i
    for i in mine:
        at = _index_of(series, i.first_bad)
        if i.state == "open" and at is not None and abs(at - cp.index) <= NEAR_NIGHTS:
            return i
    return None


def sync_alerts(client: GitHubClient, author: str, *, detection: list[SeriesDetection],
                series: dict[str, Series], settings: AlertSettings) -> AlertsSynced:
    """Bring the issues in line with the change points of `detection` (`series` by key: the
    nights the bodies chart)."""
    issues = [a for i in client.list_issues() if (a := parse_issue(i, author)) is not None]
    out, taken = AlertsSynced(), set[int]()
    for sd in detection:
        s = series.get(sd.key)
        if s is None:
            continue
        for cp in [c for c in sd.change_points if c.regression]:
            found = _match(issues, sd, cp=cp, series=s, taken=taken)
            if found is not None:
                taken.add(found.number)
            state = ("recovered" if cp.recovered_at else
                     "acknowledged" if cp.acknowledged else "open")
            if found is None:
                if state == "open":
                    _open(client, author, sd=sd, cp=cp, series=s, settings=settings, out=out)
                continue
            if found.state != "open":
                continue  # closed (by us on recovery, or by a person): left closed
            bisect = _bisect_of(found.body, settings)
            body = issue_body(s, sd, cp, server_url=settings.server_url,
                              repository=client.repository, bisect=bisect, state=state)
            fields: dict[str, Any] = {"body": body, "title": issue_title(sd, cp)}
            if state != "open":
                fields.update(state="closed", state_reason="completed")
            client.update_issue(found.number, **fields)
            (out.closed if state != "open" else out.updated).append(found.number)
    for i in issues:
        if i.state == "open" and i.number not in taken and i.series_key in {sd.key for sd in
                                                                            detection}:
            body = i.body.rstrip("\n") + f"\n\n{GONE}\n"
            client.update_issue(i.number, body=body, state="closed", state_reason="not_planned")
            out.closed.append(i.number)
    return out


def _bisect_of(body: str, settings: AlertSettings) -> Bisect | None:
    """What the issue's third hidden line says of its bisect (kept on every update)."""
    lines = body.split("\n", 3)
    tag = lines[2] if len(lines) > 2 else ""
    if tag == f"<!-- {MARKER}-bisect:dispatched -->":
        return Bisect(settings.workflow, True)
    if tag == f"<!-- {MARKER}-bisect:not-dispatched -->":
        return Bisect(settings.workflow, False)
    return None


def _create(client: GitHubClient, author: str, title: str, body: str) -> int:
    first_line = body.split("\n", 1)[0]
    second_line = body.split("\n", 2)[1]
    for attempt in range(CREATE_ATTEMPTS):
        try:
            return int(client.create_issue(title, body)["number"])
        except GitHubWriteUnknown:
            for issue in client.list_issues():
                got = parse_issue(issue, author)
                if got and got.body.startswith(f"{first_line}\n{second_line}"):
                    return got.number
            if attempt == CREATE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _open(client: GitHubClient, author: str, *, sd: SeriesDetection, cp: ChangePoint,
          series: Series, settings: AlertSettings, out: AlertsSynced) -> None:
    title = issue_title(sd, cp)
    body = issue_body(series, sd, cp, server_url=settings.server_url,
                      repository=client.repository, bisect=None)
    number = _create(client, author, title, body)
    out.created.append(number)
    bisect = Bisect(settings.workflow, False, "dispatch switched off (--no-dispatch)")
    if settings.dispatch:
        bisect = _dispatch(client, cp, sd=sd, issue=number, settings=settings)
        if bisect.dispatched:
            out.dispatched.append(number)
        else:
            out.notes.append(f"issue {number}: bisect not dispatched: {bisect.note}")
    client.update_issue(number, body=issue_body(series, sd, cp, server_url=settings.server_url,
                                                repository=client.repository, bisect=bisect))


FULL_SHA = re.compile(r"[0-9a-f]{40}")


def _dispatch(client: GitHubClient, cp: ChangePoint, *, sd: SeriesDetection, issue: int,
              settings: AlertSettings) -> Bisect:
    """workflow_dispatch of the bisect over (last_good, first_bad] with the issue to report to;
    its `check` job checks both commits are on the default branch before any GPU runs."""
    if not (FULL_SHA.fullmatch(cp.last_good) and FULL_SHA.fullmatch(cp.first_bad)):
        return Bisect(settings.workflow, False, "the history holds no full 40-character SHAs")
    inputs = {"good": cp.last_good, "bad": cp.first_bad,
              "plan": settings.bisect_plan or sd.plan, "issue": str(issue)}
    try:
        client.dispatch_workflow(settings.workflow, settings.ref, inputs)
    except GitHubError as exc:
        return Bisect(settings.workflow, False, f"GitHub refused the dispatch: {exc}")
    return Bisect(settings.workflow, True)
