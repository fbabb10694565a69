"""Who may acknowledge a slowdown: a login with write access to the repository, as GitHub's
API says (GET /repos/{owner}/{repo}/collaborators/{login}/permission). Its `permission` field
is one of admin, write, read and none (a custom role reads as its base; maintain as write,
triage as read)."""

from __future__ import annotations

import re

from gate.core.errors import GateError
from gate.github.client import GitHubClient

WRITE = ("admin", "write")
# GitHub logins: letters, digits and single hyphens, at most 39 characters.
LOGIN_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}")


def check_login(login: str) -> str:
    if not LOGIN_RE.fullmatch(login or ""):
        raise GateError(f"{login!r} is not a GitHub login")
    return login


def require_write(client: GitHubClient, login: str) -> str:
    """`login`'s permission when it includes write; a GateError naming it otherwise."""
    permission = client.collaborator_permission(check_login(login))
    if permission not in WRITE:
        raise GateError(f"{login} has {permission} access to {client.repository}: acknowledging "
                        "a slowdown needs write access; nothing was recorded")
    return permission
