"""A worker that stays: once its measurement is stored, the process makes further compiles of other cells of its GPU,
so that CUDA's start (and the compiler's first-use set-up) is paid once a process rather than once a measurement.

What stays fresh: a cell's first measurement (the one whose compile time is the cell's, cold) always starts a
process of its own; a process takes only further compiles (replicate 2, 3, ...) after it, of compile modes or eager,
never a kernel under test (its Triton JIT cache is the kernel's own), never a cell it has measured before (the
compiles of a cell stay in processes of their own), and before each one it clears what torch.compile keeps in the
process (`tracker.measure.fresh`), as inductor's own `fresh_cache` does; it stays only while what its GPU still holds
after clearing is back near a fresh process's (`fresh.MAX_LEFT_BYTES`).

The runner's side is a `Resident`: a Unix socket the worker connects to once its first measurement is stored (its
path in the worker's environment, `ENV_SOCKET`). One JSON line each way:

    worker -> runner: {"status": 0, "stays": true}         after each measurement (stays: it takes another)
    runner -> worker: {"argv": [...], "env": {...}, "stderr": "FILE"}   the next measurement, as the fork server's
                                                                        request gives a fresh child its first
A worker told nothing more (its socket closed) exits.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracker.runner.plan import CellId, Job
from workloads.modes import MODES

if TYPE_CHECKING:
    from tracker.runner.forkserver import Child

ENV_SOCKET = "COMPILE_BASELINES_RESIDENT"  # where a worker that may stay reports and takes its next measurement
POLL_S = 0.2


def may_take(job: Job, measured: set[CellId]) -> bool:
    """Whether a process that has measured the cells `measured` may make `job` (the module's docstring says why)."""
    return job.replicate > 1 and job.cell.mode in MODES and job.cell not in measured


@dataclass
class Request:
    """The next measurement for a worker that stays: its worker arguments, its whole environment, its stderr file."""

    argv: list[str]
    env: dict[str, str]
    stderr: str


@dataclass(eq=False)
class Resident:
    """The runner's end of one worker process that may stay: the socket it reports to, the cells it has measured,
    its GPU (its position in the run's list)."""

    gpu: int | None
    listening: bool = True  # False: a worker that is not to stay (no socket, it just exits)
    measured: set[CellId] = field(default_factory=set)
    child: Child | None = None  # the fork server's, once launched
    _dir: str | None = None
    _listener: socket.socket | None = None
    _conn: socket.socket | None = None
    _pending: bytes = b""

    def __post_init__(self) -> None:
        if self.listening:
            self._dir = tempfile.mkdtemp(prefix="cb-res-")
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener.bind(self.path)
            self._listener.listen(1)

    @property
    def path(self) -> str:
        if self._dir is None:
            raise ValueError("a worker that is not to stay has no socket")
        return os.path.join(self._dir, "s")

    def env(self) -> dict[str, str]:
        """What the worker is told of its socket: none where it is not to stay."""
        return {ENV_SOCKET: self.path} if self.listening else {}

    def report(self, timeout: float, gone: Callable[[], bool]) -> tuple[dict[str, Any] | None, bool]:
        """(the worker's report on its measurement, or None; whether `timeout` passed first). None without a timeout:
        the worker exited without reporting (`gone()`: the caller's word that it has), or closed its socket."""
        deadline = _now() + timeout
        while True:
            exited = gone()
            waiting = [s for s in (self._listener if self._conn is None else self._conn,) if s is not None]
            ready, _, _ = select.select(waiting, [], [], 0 if exited else max(0.0, min(POLL_S, deadline - _now())))
            if ready and self._conn is None and self._listener is not None:
                self._conn, _ = self._listener.accept()
            elif ready and self._conn is not None:
                data = self._conn.recv(1 << 16)
                if not data:
                    return None, False
                self._pending += data
                if b"\n" in self._pending:
                    line, _, self._pending = self._pending.partition(b"\n")
                    return json.loads(line), False
            if exited and not ready:
                return None, False
            if _now() >= deadline:
                return None, True

    def send(self, request: Request) -> bool:
        """Hand the worker its next measurement; False when it can no longer take one (its socket closed)."""
        if self._conn is None:
            return False
        try:
            self._conn.sendall(json.dumps({"argv": request.argv, "env": request.env,
                                           "stderr": request.stderr}).encode() + b"\n")
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Tell the worker to exit (its socket closed) and remove the socket."""
        for s in (self._conn, self._listener):
            if s is not None:
                s.close()
        self._conn = self._listener = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


def _now() -> float:
    return time.monotonic()


class Channel:
    """The worker's end: reports each measurement's status, takes the next one."""

    def __init__(self, path: str) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path)
        self._file = self._sock.makefile("rb")

    @classmethod
    def from_env(cls) -> Channel | None:
        """The runner's socket where this worker may stay, else None (or where it cannot be reached)."""
        path = os.environ.get(ENV_SOCKET)
        if not path:
            return None
        try:
            return cls(path)
        except OSError:
            return None

    def report(self, status: int, stays: bool) -> None:
        self._sock.sendall(json.dumps({"status": status, "stays": stays}).encode() + b"\n")

    def next(self) -> Request | None:
        """The next measurement, or None: the runner has no more for this process."""
        line = self._file.readline()
        if not line:
            return None
        message = json.loads(line)
        return Request(list(message["argv"]), dict(message["env"]), str(message["stderr"]))

    def close(self) -> None:
        self._file.close()
        self._sock.close()


def take(request: Request) -> None:
    """Make this process the one a fresh child for `request` would be: exactly its environment (the socket's kept),
    its stderr file."""
    keep = os.environ.get(ENV_SOCKET)
    os.environ.clear()
    os.environ.update(request.env)
    if keep is not None:
        os.environ[ENV_SOCKET] = keep
    err = os.open(request.stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(err, 2)
    os.close(err)
