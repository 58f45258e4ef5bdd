"""Fixtures shared by the tests: the local fake of GitHub's REST API (tests/fake_github.py), Ctrl-C, and no plugin
but those a test installs."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator

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
def cli_run(monkeypatch: pytest.MonkeyPatch) -> Callable[..., int]:
    """`cli_run(argv, env)`: `compile-baselines ARGV` in this process, its exit code, with `env` as GitHub's
    variables (GITHUB_TOKEN, GITHUB_API_URL; those not in it unset)."""
    def run(argv: list[str], env: dict[str, str] | None = None) -> int:
        from tracker import cli

        for name in ("GITHUB_TOKEN", "GITHUB_API_URL"):
            monkeypatch.delenv(name, raising=False)
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        return cli.main(argv)

    return run


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
