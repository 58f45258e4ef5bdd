"""Fixtures shared by the tests: the local fake of GitHub's REST API (tests/fake_github.py), Ctrl-C, and no plugin
but those a test installs."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest
from fake_github import FakeGitHub

from workloads.names import ENV_PLUGINS

# Before any test module asks for a workload, in this process and in every process the tests start: a kernel
# repository installed beside the project (docs/plugins.md) would otherwise add its workloads, presets and
# candidates to what the tests see. Tests that need a plugin install it (tests/plugin_fixture.py enables it).
os.environ[ENV_PLUGINS] = ""


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
