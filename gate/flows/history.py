"""The default branch's history, tied to the other stages: a run recorded only when it is fit
to be (complete, valid, from the default branch), an acknowledgement recorded only for a
login with write access and the PR's current head, the verdict of a head with its
acknowledgements applied, and the alerts brought in line with detection."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gate.core.errors import GateError
from gate.core.git import run_git
from gate.github.alerts import AlertSettings, AlertsSynced, sync_alerts
from gate.github.client import GitHubClient
from gate.github.permission import require_write
from gate.history.detect import Ancestry
from gate.history.model import Acknowledgement, Detection
from gate.history.store import Added, HistoryStore, RunMeta
from gate.judge import acknowledge as ack
from gate.judge.baseline import refuse_branch
from gate.judge.compare import NoReference, compare_results
from gate.judge.verdict import Verdict
from gate.measure.results import Results

CHECK_NAME = re.compile(r"[a-z0-9_]+(\.[a-z0-9_]+)+")
SHA = re.compile(r"[0-9a-f]{40}")


def unfit(results: Results) -> list[str]:
    """Why a run must not go into the history (or a baseline): its errors judged alone."""
    return compare_results(results, NoReference(), results.plan.thresholds).errors


def record_run(store: HistoryStore, results: Results, meta: RunMeta, *, default_branch: str,
               force_branch: bool = False, if_new: bool = False) -> Added:
    why = refuse_branch(meta.branch, default_branch, force_branch)
    if why:
        raise GateError(f"history not updated: {why}")
    if problems := unfit(results):
        raise GateError("history not updated: the results are not fit to be recorded:\n"
                        + "\n".join(f"  - {p}" for p in problems))
    return store.add_run(results, meta, if_new=if_new)


@dataclass(frozen=True)
class AckRequest:
    pr: int
    head_sha: str
    check: str
    reason: str
    login: str
    created_at: str


def acknowledge(store: HistoryStore, client: GitHubClient, req: AckRequest) -> Acknowledgement:
    """Check who asks (write access), what (a check name, a reason) and where (the PR's head
    is still `head_sha`), then keep the acknowledgement."""
    if not CHECK_NAME.fullmatch(req.check):
        raise GateError(f"{req.check!r} is not a check name (like drain.req_per_min)")
    if not SHA.fullmatch(req.head_sha):
        raise GateError("--sha must be the PR head's full 40-character commit SHA")
    if not req.reason.strip():
        raise GateError("an acknowledgement needs a reason (--reason)")
    permission = require_write(client, req.login)
    head = ((client.pull_request(req.pr).get("head") or {}).get("sha"))
    if head != req.head_sha:
        raise GateError(f"PR #{req.pr}'s head is {head}, not {req.head_sha}: acknowledge the "
                        "commit the verdict is for (a new push needs a new acknowledgement)")
    return store.acknowledge(Acknowledgement(
        repository=client.repository, pr=req.pr, head_sha=req.head_sha, check=req.check,
        reason=req.reason.strip(), login=req.login, permission=permission,
        created_at=req.created_at))


def acknowledged_verdict(verdict: Verdict, store: HistoryStore, pr: int, head_sha: str
                         ) -> Verdict:
    kept = store.acknowledgements(pr=pr)
    return ack.apply_acknowledgements(verdict, [
        ack.Acknowledgement(check=a.check, login=a.login, reason=a.reason, head_sha=a.head_sha,
                            at=a.created_at) for a in kept
    ], head_sha)


@dataclass(frozen=True)
class Merges:
    linked: list[Acknowledgement]  # acknowledgements now marking the commit their PR became
    notes: list[str]  # why each other acknowledged head is not linked (yet)


def link_merges(store: HistoryStore, client: GitHubClient, *, default_branch: str) -> Merges:
    """After merge, a PR's acknowledgements move to the history. For each acknowledged head not
    yet linked, GitHub says whether its PR merged: into the default branch, with that very head,
    it is linked to the commit the PR became there (`merge_commit_sha`: the merge, the squash or
    the last rebased commit), which a change point's range can then hold. A PR merged with
    another head (pushed after the acknowledgement) is not: the acknowledgement was of other
    code. One request per acknowledged head, asked again each night until it merges."""
    linked, notes = [], []
    for pr, head in store.unmerged(repository=client.repository):
        pull = client.pull_request(pr)
        why = not_merged(pull, head, default_branch)
        if why:
            notes.append(f"PR #{pr} at {head[:12]}: {why}")
            continue
        linked += store.link_merge(pr, head, str(pull["merge_commit_sha"]),
                                   repository=client.repository)
    return Merges(linked, notes)


def not_merged(pull: dict, head: str, default_branch: str) -> str:
    """Why `pull` (GitHub's PR) did not merge `head` into the default branch, or ''."""
    if not pull.get("merged_at"):
        return "not merged"
    base = (pull.get("base") or {}).get("ref")
    if base != default_branch:
        return f"merged into {base}, not {default_branch}"
    merged_head = (pull.get("head") or {}).get("sha")
    if merged_head != head:
        return (f"merged at {str(merged_head)[:12]}, not at the acknowledged head: a new push "
                "needs a new acknowledgement")
    if not SHA.fullmatch(str(pull.get("merge_commit_sha"))):
        return "GitHub names no merge commit"
    return ""


def git_ancestry(repo: Path) -> Ancestry:
    """is_ancestor(a, b) with git: whether commit a is in b's history."""
    def is_ancestor(a: str, b: str) -> bool:
        try:  # exit 1: not an ancestor (run_git raises on any failure, an unknown commit too)
            run_git(repo, ["merge-base", "--is-ancestor", a, b], "checking commit ancestry")
        except GateError:
            return False
        return True
    return is_ancestor


def alert(store: HistoryStore, detection: Detection, *, client: GitHubClient, author: str,
          settings: AlertSettings) -> AlertsSynced:
    series = {s.key: s for s in store.all_series(judged_only=False)}
    return sync_alerts(client, author, detection=detection.series, series=series,
                       settings=settings)
