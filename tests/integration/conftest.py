"""Fixtures the integration tests share: the local GitHub server on a clock the client under
test can share, and the action's workspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.action_runner import action_workspace
from support.fake_github import TOKEN, FakeClock, FakeGitHub


@pytest.fixture
def clock() -> FakeClock:
    """Time for the fake server and an in-process client: sleeping moves it on at once."""
    return FakeClock()


@pytest.fixture
def fake(clock: FakeClock) -> Iterator[FakeGitHub]:
    """The local GitHub server (support/fake_github.py) on `clock`; it accepts `TOKEN` as a
    job's GITHUB_TOKEN."""
    with FakeGitHub(clock=clock.now) as server:
        server.good_tokens.add(TOKEN)
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """tmp_path/workspace, a vLLM-shaped checkout, beside stored results in tmp_path/stored
    (support/action_runner.py: action_workspace)."""
    return action_workspace(tmp_path)
