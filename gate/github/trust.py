"""Run-time checks of what the workflows' trust model rests on but YAML cannot enforce.

The workflows that run PR code on self-hosted GPU runners rely on repository settings and on
the state of the PR when a job starts:

- a fork's PR runs only after a reviewer approves the `perf-gate-fork` environment. A job that
  names an environment without required reviewers (or one that does not exist: GitHub then
  creates it, unprotected) starts at once, so `check_environment` fails closed unless GitHub
  says the environment has at least one required reviewer and prevents self-review (the
  person who labelled or dispatched a run cannot also approve it);
- the approval label approves one commit, the one its labeller reviewed: `check_review`
  requires that person's latest decisive review of the PR to approve exactly the event's head
  commit (a push between the review and the label makes the label approve nothing), and after
  a push the label is withdrawn (`revoke_label`);
- a manual rerun measures the commit its dispatcher named, and only while that commit is still
  the PR's head (`check_head`);
- a bisect runs only commits of the default branch, merged after review
  (`check_on_default_branch`): GitHub's compare API says whether the branch's tip contains it;
- the no-approval path (a person's own push to a branch of the repository) and the approval
  label count only for people who may push to the repository (`check_writer`: GitHub's
  permission of that login, `write` or `admin`; maintain counts as write, triage as read);
- a workflow that starts GPU work on its own say-so runs only as itself, from the default
  branch (`check_caller`): not called by another workflow, not from another branch.

Each call goes through `GitHubClient.request`. Reading an environment needs `actions: read`
on the job's GITHUB_TOKEN; a PR and its reviews need `pull-requests: read`; removing a label
needs `pull-requests: write` (or `issues: write`); the repository and compare,
`contents: read`; a collaborator's permission, the metadata read every token has.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from pydantic import BaseModel, ValidationError

from gate.core.errors import EXIT_ERROR, EXIT_FAIL, GateError
from gate.core.settings import Settings
from gate.github.client import GitHubClient, GitHubError, GitHubForbidden

COMMIT_SHA_RE = re.compile(r"[0-9a-f]{40}")
ENVIRONMENT_PERMISSION = "actions: read"
# GitHub's `permission` of a collaborator: admin, write, read or none (maintain is reported
# as write, triage as read). Pushing to the repository takes write.
WRITER_PERMISSIONS = {"admin", "write"}
LOGIN_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")  # a GitHub login; no app [bot]


class TrustError(GateError):
    """A setting or state the trust model needs is missing: refuse to run PR code (exit 1)."""

    exit_code = EXIT_FAIL


class UnknownTrust(GateError):
    """GitHub could not tell us whether it is safe: fail closed (exit 4)."""

    exit_code = EXIT_ERROR


class ProtectionRule(BaseModel):
    type: str
    prevent_self_review: bool | None = None
    reviewers: list[dict] | None = None


class Environment(BaseModel):
    name: str
    can_admins_bypass: bool | None = None
    protection_rules: list[ProtectionRule] = []


class ReviewUser(BaseModel):
    login: str


class Review(BaseModel):
    """One item of GET /repos/{owner}/{repo}/pulls/{n}/reviews (oldest first)."""

    id: int
    user: ReviewUser | None = None  # None: a deleted account
    state: str
    commit_id: str | None = None
    html_url: str = ""


# States that decide: COMMENTED and PENDING neither approve nor withdraw an approval.
DECISIVE_STATES = {"APPROVED", "CHANGES_REQUESTED", "DISMISSED"}


class EnvironmentReview(BaseModel):
    """What `check_environment` found: the environment's required reviewers."""

    name: str
    reviewers: int
    prevent_self_review: bool
    can_admins_bypass: bool


REPOSITORY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}")


def client_for(settings: Settings, repository: str | None = None) -> GitHubClient:
    """A client for this run's repository, or for `repository` (owner/name: the gate's own,
    whose commit the workflows pin)."""
    if settings.github_token is None or not settings.repository:
        raise GateError("this check needs GITHUB_TOKEN and GITHUB_REPOSITORY")
    if repository is not None and not REPOSITORY_RE.fullmatch(repository):
        raise GateError(f"--repo {repository!r} is not owner/name")
    return GitHubClient(settings.api_url, repository or settings.repository,
                        settings.github_token)


def check_commit_sha(value: str, what: str) -> str:
    if not COMMIT_SHA_RE.fullmatch(value or ""):
        raise GateError(f"{what} {value!r} is not a full 40-character lowercase commit SHA")
    return value


def check_environment(client: GitHubClient, name: str) -> EnvironmentReview:
    """The environment's required-reviewers rule, or TrustError when it has none."""
    path = f"/repos/{client.repository}/environments/{quote(name, safe='')}"
    try:
        data = client.request("GET", path).json()
    except GitHubForbidden as exc:
        if exc.status == 404:
            raise TrustError(
                f"environment {name!r} does not exist (or this token cannot see it): a job "
                "that names it would create it without reviewers and run at once. Create it "
                "with required reviewers (docs/security.md, 'Running on a public repository')"
            ) from None
        raise UnknownTrust(
            f"cannot read environment {name!r} ({exc}); the job's token needs "
            f"`permissions: {ENVIRONMENT_PERMISSION}`. Failing closed"
        ) from None
    except GitHubError as exc:
        raise UnknownTrust(f"cannot read environment {name!r}: {exc}. Failing closed") from None
    try:
        env = Environment.model_validate(data)
    except ValidationError as exc:
        raise UnknownTrust(
            f"GitHub's answer for environment {name!r} is not an environment "
            f"({exc.error_count()} problem(s)). Failing closed"
        ) from None
    rules = [r for r in env.protection_rules if r.type == "required_reviewers"]
    reviewers = sum(len(r.reviewers or []) for r in rules)
    if not rules or reviewers == 0:
        raise TrustError(
            f"environment {name!r} has no required reviewers, so a fork's code would run on "
            "the GPU runner without anyone approving it. Add required reviewers in Settings > "
            "Environments; refusing to run"
        )
    if not any(r.prevent_self_review for r in rules):
        raise TrustError(
            f"environment {name!r} lets the person who started a run approve it, so one "
            "person could both label (or dispatch) and approve a commit. Turn on 'Prevent "
            "self-review' in Settings > Environments; refusing to run"
        )
    if env.can_admins_bypass:
        raise TrustError(
            f"environment {name!r} lets administrators bypass its reviewers, so one person "
            "could send a commit to the GPU runner alone. Turn off 'Allow administrators to "
            "bypass configured protection rules' in Settings > Environments; refusing to run"
        )
    return EnvironmentReview(
        name=env.name,
        reviewers=reviewers,
        prevent_self_review=True,
        can_admins_bypass=bool(env.can_admins_bypass),
    )


class CollaboratorPermission(BaseModel):
    """GET /repos/{owner}/{repo}/collaborators/{username}/permission."""

    permission: str
    role_name: str = ""


def check_writer(client: GitHubClient, login: str) -> str:
    """`login`'s permission on the repository when it is write or admin; TrustError for any
    other (read, triage, none, a bot's name), UnknownTrust when GitHub cannot tell."""
    if not LOGIN_RE.fullmatch(login or ""):
        raise TrustError(f"{login!r} is not a person's GitHub login (a bot or an app has no "
                         "say here): the approval path applies")
    path = f"/repos/{client.repository}/collaborators/{quote(login, safe='')}/permission"
    try:
        data = client.request("GET", path).json()
    except GitHubForbidden as exc:
        if exc.status == 404:
            raise TrustError(f"@{login} is not a user GitHub knows: the approval path applies"
                             ) from None
        raise UnknownTrust(f"cannot read @{login}'s permission ({exc}). Failing closed") from None
    except GitHubError as exc:
        raise UnknownTrust(f"cannot read @{login}'s permission: {exc}. Failing closed") from None
    try:
        found = CollaboratorPermission.model_validate(data)
    except ValidationError:
        raise UnknownTrust(f"GitHub's answer for @{login}'s permission is not one. Failing "
                           "closed") from None
    if found.permission not in WRITER_PERMISSIONS:
        role = f" (role {found.role_name})" if found.role_name else ""
        raise TrustError(f"@{login} has {found.permission!r} permission{role} on "
                         f"{client.repository}, not write: the approval path applies")
    return found.permission


def check_caller(*, event_name: str | None, ref: str | None, workflow_ref: str | None,
                 repository: str, branch: str, workflows: list[str],
                 events: tuple[str, ...] = ("workflow_dispatch",)) -> str:
    """The run's own workflow file when the run is one of `workflows` of `repository`, started
    on `events` from `branch` (the default branch, or the rerun's sandbox branch); TrustError
    otherwise. GITHUB_WORKFLOW_REF names the run's top workflow, which for a called workflow
    is its caller's."""
    expected_ref = f"refs/heads/{branch}"
    if event_name not in events:
        raise TrustError(f"this workflow starts on {', '.join(events)} only, not on "
                         f"{event_name or 'an unknown event'} (another workflow calling it is "
                         "refused)")
    if ref != expected_ref:
        raise TrustError(f"this run is for {ref or 'no ref'}, not {expected_ref}: only that "
                         "branch's file of this workflow runs here")
    allowed = {f"{repository}/.github/workflows/{name}@{expected_ref}" for name in workflows}
    if workflow_ref not in allowed:
        raise TrustError(f"the run's workflow is {workflow_ref or 'unknown'}, not "
                         f"{' or '.join(sorted(allowed))}: a workflow that calls this one, or "
                         "a copy of it, is refused")
    return workflow_ref


def check_head(client: GitHubClient, pr: int, sha: str) -> None:
    """TrustError unless PR `pr`'s head commit is still `sha`."""
    try:
        pull = client.request("GET", f"/repos/{client.repository}/pulls/{int(pr)}").json()
    except GitHubForbidden as exc:
        raise UnknownTrust(f"cannot read PR #{pr} ({exc}). Failing closed") from None
    head = (pull.get("head") or {}).get("sha") if isinstance(pull, dict) else None
    if not isinstance(head, str) or not head:
        raise UnknownTrust(f"GitHub's answer for PR #{pr} has no head commit. Failing closed")
    if head != sha:
        raise TrustError(
            f"PR #{pr}'s head is {head}, not the requested commit {sha}: the PR moved since "
            "this run was dispatched. Review the new commit and dispatch again with its SHA"
        )


def revoke_label(client: GitHubClient, pr: int, label: str) -> bool:
    """Remove `label` from PR `pr`. True when it was removed, False when it was not there."""
    base = f"/repos/{client.repository}/issues/{int(pr)}/labels"
    try:
        client.request("DELETE", f"{base}/{quote(label, safe='')}")
        return True
    except GitHubForbidden as exc:
        if exc.status != 404:
            raise
    # 404: the label is not on the PR (already removed), or the PR cannot be seen. Tell which.
    names = {item.get("name") for item in client.paginate(base) if isinstance(item, dict)}
    if label in names:
        raise UnknownTrust(f"could not remove label {label!r} from PR #{pr}")
    return False


def check_review(client: GitHubClient, pr: int, sha: str, reviewer: str) -> Review:
    """The approving review that ties an approval label to one commit: `reviewer`'s latest
    decisive review of PR `pr` approves exactly `sha`, and `reviewer` may write to the
    repository. TrustError otherwise."""
    path = f"/repos/{client.repository}/pulls/{int(pr)}/reviews"
    try:
        reviews = [Review.model_validate(item) for item in client.paginate(path)]
    except GitHubForbidden as exc:
        raise UnknownTrust(f"cannot read the reviews of PR #{pr} ({exc}); the job's token "
                           "needs `permissions: pull-requests: read`. Failing closed") from None
    except (GitHubError, ValidationError) as exc:
        raise UnknownTrust(f"cannot read the reviews of PR #{pr}: {exc}. Failing closed") from None
    who = reviewer.casefold()
    theirs = [r for r in reviews if r.user and r.user.login.casefold() == who
              and r.state in DECISIVE_STATES]
    if not theirs:
        raise TrustError(f"@{reviewer} added the approval label but has not approved PR #{pr}: "
                         f"approve commit {sha} in a review, then add the label again")
    latest = theirs[-1]
    if latest.state != "APPROVED":
        raise TrustError(f"@{reviewer}'s latest review of PR #{pr} is {latest.state}, not an "
                         "approval: the label approves nothing")
    if latest.commit_id != sha:
        raise TrustError(
            f"@{reviewer} approved commit {latest.commit_id}, but the label landed on {sha}: "
            "the PR changed between the review and the label. Review the new commit, approve "
            "it, and add the label again"
        )
    check_writer(client, reviewer)  # a triage-role labeller's review approves nothing
    return latest


def default_branch(client: GitHubClient) -> str:
    try:
        repo = client.request("GET", f"/repos/{client.repository}").json()
    except GitHubError as exc:
        raise UnknownTrust(f"cannot read the repository ({exc}). Failing closed") from None
    branch = repo.get("default_branch") if isinstance(repo, dict) else None
    if not isinstance(branch, str) or not branch:
        raise UnknownTrust("GitHub's answer names no default branch. Failing closed")
    return branch


def check_on_default_branch(client: GitHubClient, sha: str) -> str:
    """The default branch's name when `sha` is one of its commits (its tip or older); a
    TrustError when it is not (another branch's or a fork's commit), UnknownTrust when GitHub
    cannot tell."""
    branch = default_branch(client)
    path = (f"/repos/{client.repository}/compare/"
            f"{quote(branch, safe='')}...{quote(sha, safe='')}")
    try:
        status = client.request("GET", path).json().get("status")
    except GitHubForbidden as exc:
        if exc.status == 404:
            raise TrustError(f"{sha} is not a commit of this repository") from None
        raise UnknownTrust(f"cannot compare {sha} with {branch} ({exc}). Failing closed") from None
    except GitHubError as exc:
        raise UnknownTrust(f"cannot compare {sha} with {branch} ({exc}). Failing closed") from None
    if status in ("identical", "behind"):
        return branch
    if status in ("ahead", "diverged"):
        raise TrustError(f"{sha} is not a commit of the default branch {branch} (GitHub: "
                         f"{status}): only merged commits are measured on the GPU runner")
    raise UnknownTrust(f"GitHub's compare of {sha} with {branch} says {status!r}. Failing closed")
