"""Fixtures shared by the tests that talk to the local fake of GitHub's REST API (tests/fake_github.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_github import FakeGitHub


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server


@pytest.fixture
def waits() -> list[float]:
    """The waits a client asked for: pass `sleep=waits.append` so that tests never sleep."""
    return []
