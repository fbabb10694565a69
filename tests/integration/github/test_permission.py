"""Write access as GitHub's API says it (gate.github.permission), against the local server."""

from __future__ import annotations

import pytest

from gate.core.errors import GateError
from gate.github.client import GitHubClient
from gate.github.permission import check_login, require_write


@pytest.fixture
def gh(fake):
    fake.permissions.update({"admin-person": "admin", "writer": "write", "reader": "read",
                             "outsider": "none"})
    fake.unknown_users.add("ghost")
    return GitHubClient(fake.url, fake.repository, "good-token")


@pytest.mark.parametrize(("login", "permission"), [("admin-person", "admin"), ("writer", "write")])
def test_write_or_admin_may_acknowledge(gh, fake, login, permission):
    assert require_write(gh, login) == permission
    (get,) = fake.requests_to("GET", f"/collaborators/{login}/permission")
    assert get.path == f"/repos/{fake.repository}/collaborators/{login}/permission"


@pytest.mark.parametrize(("login", "said"), [("reader", "read"), ("outsider", "none"),
                                             ("ghost", "none")])
def test_anyone_else_is_refused_with_what_github_said(gh, login, said):
    with pytest.raises(GateError, match=f"{login} has {said} access to octo/vllm: acknowledging "
                                        "a slowdown needs write access"):
        require_write(gh, login)


@pytest.mark.parametrize("login", ["", "-x", "a--b", "a/b", "x" * 40, "name[bot]", "../etc"])
def test_a_malformed_login_never_reaches_the_url(gh, fake, login):
    with pytest.raises(GateError, match="is not a GitHub login"):
        require_write(gh, login)
    assert fake.requests == []
    assert check_login("Octo-Cat1") == "Octo-Cat1"
