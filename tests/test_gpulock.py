"""The cross-process GPU lock: timing never overlaps another process's GPU work, compiling never blocks it."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tracker.gpulock import GpuLock


def held_elsewhere(path: Path) -> bool:
    """Whether another open of the lock file (as another process would) fails to take it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_held_excludes_others_and_is_reentrant(tmp_path: Path) -> None:
    lock = GpuLock(str(tmp_path / "gpu.lock"))
    with lock.held():
        with lock.held():  # our do_bench inside the cell's timing
            assert held_elsewhere(tmp_path / "gpu.lock")
        assert held_elsewhere(tmp_path / "gpu.lock")
    assert not held_elsewhere(tmp_path / "gpu.lock")


def test_compiling_releases_the_lock_and_the_first_run_takes_it(tmp_path: Path) -> None:
    path = tmp_path / "gpu.lock"
    lock = GpuLock(str(path))
    seen: dict[str, bool] = {}

    def compile_fx(graph: str) -> object:
        seen["while compiling"] = held_elsewhere(path)
        return lambda: seen.setdefault("first run", held_elsewhere(path))

    compiler = lock.compiling(compile_fx)
    with lock.after_compile():
        seen["before compiling"] = held_elsewhere(path)
        compiled = compiler("graph")
        compiled()
    assert seen == {"before compiling": False, "while compiling": False, "first run": True}
    assert not held_elsewhere(path)


def test_a_compile_inside_held_work_lets_others_in_and_takes_the_lock_back(tmp_path: Path) -> None:
    path = tmp_path / "gpu.lock"
    lock = GpuLock(str(path))
    compiler = lock.compiling(lambda: held_elsewhere(path))
    with lock.held():
        assert compiler() is False  # a graph break recompiles in the middle of a locked first run
        assert held_elsewhere(path)
    assert not held_elsewhere(path)


def test_a_failing_compile_leaves_the_lock_free(tmp_path: Path) -> None:
    path = tmp_path / "gpu.lock"
    lock = GpuLock(str(path))

    def broken() -> None:
        raise RuntimeError("inductor failed")

    with pytest.raises(RuntimeError), lock.after_compile():
        lock.compiling(broken)()
    assert not held_elsewhere(path)


def test_install_routes_inductors_compiler_through_the_lock(tmp_path: Path) -> None:
    # A fresh process: install() patches torch for the rest of the process.
    script = textwrap.dedent(f"""
        import fcntl, os, torch
        from tracker.gpulock import GpuLock, install
        path = {str(tmp_path / "gpu.lock")!r}
        def elsewhere():
            fd = os.open(path, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return False
            except BlockingIOError:
                return True
            finally:
                os.close(fd)
        lock = GpuLock(path)
        print(install(lock))
        f = torch.compile(lambda x: x * 2 + 1, dynamic=False)
        with lock.after_compile():
            f(torch.ones(4))
            print("held after the compiled first run:", elsewhere())
        print("held after the first call:", elsewhere())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parent.parent, check=True).stdout
    assert "compile_fx.compile_fx" in out
    assert "held after the compiled first run: True" in out
    assert "held after the first call: False" in out
