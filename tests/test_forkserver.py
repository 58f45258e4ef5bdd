"""The fork server starts each measurement's process from one that has imported torch and the compiler once
(tracker.runner.forkserver): a child must still be a process of its own, with exactly the environment, directory and
stderr file it was given, and one killed or orphaned must never leave the runner waiting."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tracker.runner.forkserver import Child, ForkServer, stderr_tail

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ForkServer]:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("FORK_TEST", "the server's")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")  # the runner's: every GPU of the host
    fs = ForkServer(preload=("forkserver_child",))
    yield fs
    fs.close()


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie that only waits for its new parent to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def _until(done: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def hanging(server: ForkServer, tmp_path: Path) -> tuple[Child, int]:
    """A child that has started a sleeping grandchild, and the grandchild's pid."""
    pid_file = tmp_path / "grandchild"
    child = server.launch("forkserver_child", ["hang", str(pid_file)], {"PATH": os.environ["PATH"]}, tmp_path,
                          tmp_path / "stderr.txt")
    _until(lambda: pid_file.exists() and bool(pid_file.read_text()))
    return child, int(pid_file.read_text())


def test_a_child_has_the_environment_directory_and_stderr_file_it_was_given_and_a_session_of_its_own(
        server: ForkServer, tmp_path: Path) -> None:
    out, err = tmp_path / "seen.json", tmp_path / "stderr.txt"
    child = server.launch("forkserver_child", ["report", str(out)], {"FORK_TEST": "the child's",
                                                                      "CUDA_VISIBLE_DEVICES": "2"}, tmp_path, err)
    assert server.wait(child, 60)
    assert child.status == 3
    # its one GPU is what the CUDA driver will read when the child first touches CUDA, not the server's list
    assert json.loads(out.read_text()) == {"var": "the child's", "server_var": None, "cwd": str(tmp_path),
                                           "own_session": True, "cuda_visible": "2"}
    assert stderr_tail(err).strip().splitlines()[-1] == "the last line of stderr"


def test_a_child_killed_at_its_time_limit_takes_the_processes_it_started_with_it(server: ForkServer,
                                                                               tmp_path: Path) -> None:
    child, grandchild = hanging(server, tmp_path)
    assert not server.wait(child, 0.2)
    server.kill(child)
    assert server.wait(child, 30) and child.status == -9
    _until(lambda: _gone(grandchild))


def test_a_server_that_exits_leaves_no_child_waiting_and_the_next_launch_starts_another(server: ForkServer,
                                                                                       tmp_path: Path) -> None:
    child, grandchild = hanging(server, tmp_path)
    assert server._proc is not None
    first = server._proc
    first.kill()
    assert server.wait(child, 30) and child.status is None  # nothing more can be known of it
    server.kill(child)  # still possible: the runner's interrupt ends it
    _until(lambda: _gone(grandchild))
    again = server.launch("forkserver_child", ["report", str(tmp_path / "seen.json")], {}, tmp_path,
                          tmp_path / "stderr2.txt")
    assert server.wait(again, 60) and again.status == 3 and server._proc is not first


def test_a_module_that_cannot_be_imported_is_not_preloaded_and_a_child_that_raises_exits_non_zero(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    fs = ForkServer(preload=("no_such_module_here", "forkserver_child"))
    try:
        child = fs.launch("forkserver_child", ["report"], {}, tmp_path, tmp_path / "stderr.txt")  # too few args
        assert fs.wait(child, 60) and child.status == 1
        assert "ValueError" in stderr_tail(tmp_path / "stderr.txt")
    finally:
        fs.close()


def test_a_server_started_in_the_background_serves_the_first_launch(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    fs = ForkServer(preload=("forkserver_child",))
    try:
        fs.start_in_background()
        assert fs._starting is not None
        fs._starting.join(60)
        first = fs._proc
        assert first is not None and first.poll() is None
        child = fs.launch("forkserver_child", ["report", str(tmp_path / "seen.json")], {}, tmp_path,
                          tmp_path / "stderr.txt")
        assert fs.wait(child, 60) and child.status == 3 and fs._proc is first
    finally:
        fs.close()


def test_modules_preloaded_later_are_imported_before_the_next_child_is_forked(server: ForkServer,
                                                                                tmp_path: Path) -> None:
    def loaded(name: str) -> bool:
        out = tmp_path / f"{name}.json"
        child = server.launch("forkserver_child", ["loaded", str(out), "colorsys"], {}, tmp_path, tmp_path / "err")
        assert server.wait(child, 60) and child.status == 0
        return json.loads(out.read_text())

    assert loaded("before") is False
    server.preload_more(("colorsys", "no_such_module_here"))  # one that cannot be imported is left out, as at the start
    assert loaded("after") is True


def test_a_child_that_needs_none_of_the_modules_preloaded_later_is_forked_before_they_are_imported(
        server: ForkServer, tmp_path: Path) -> None:
    def loaded(name: str, preloaded: bool) -> bool:
        out = tmp_path / f"{name}.json"
        child = server.launch("forkserver_child", ["loaded", str(out), "colorsys"], {}, tmp_path, tmp_path / "err",
                              preloaded=preloaded)
        assert server.wait(child, 60) and child.status == 0
        return json.loads(out.read_text())

    server.preload_more(("colorsys",))  # the compiler, in a run: an eager measurement does not wait for its import
    assert loaded("eager", preloaded=False) is False
    assert loaded("compiled", preloaded=True) is True
    assert loaded("eager again", preloaded=False) is True  # imported once, every child forked after has it


def test_the_early_server_is_one_per_process_until_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracker.runner import forkserver

    monkeypatch.setattr(forkserver, "BASE", ("colorsys",))  # a quick import, not torch's
    monkeypatch.setattr(forkserver, "_EARLY", None)
    first = forkserver.early()  # the process that becomes a `run` starts it; the run takes the same one
    assert forkserver.early() is first
    first.close()
    second = forkserver.early()  # a later run of the same process gets a server that runs
    assert second is not first
    second.close()
