"""Fixtures shared by the tests: the local fake of GitHub's REST API (tests/fake_github.py), and Ctrl-C."""

from __future__ import annotations

import signal
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


@pytest.fixture(autouse=True, scope="session")
def interruptible() -> None:
    """SIGINT is a KeyboardInterrupt here and in the processes the tests start, also when a shell ran the suite in
    the background (its background jobs ignore SIGINT, and an ignored signal stays ignored across exec): the
    tests of interrupted runs send it."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
