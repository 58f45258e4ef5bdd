"""How many processes of one GPU create their CUDA context at once.

Context creation is driver work, and many processes creating contexts at once on a host of several GPUs took many
times as long each as on a host of one (docs/runner.md has the figures). The runner gives each GPU a few turns
(`InitGate`), files under flock beside its GPU lock; a measurement takes one for its cuda_init phase and records its
wait for it as the phase cuda_init_wait (tracker.measure.harness._start_cuda), so a run's cell store shows the queue
apart from the work.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator

ENV_GATE = "COMPILE_BASELINES_CUDA_INIT_GATE"  # "PATH_PREFIX,N": N turns, the files PATH_PREFIX-0 ... -(N-1)
POLL_S = 0.005


class InitGate:
    """`turns` lock files; `held` takes the first one free (polling, so no turn idles while another is waited on)."""

    def __init__(self, prefix: str, turns: int) -> None:
        if turns < 1:
            raise ValueError(f"an init gate needs a turn at least, not {turns}")
        self.paths = [f"{prefix}-{k}" for k in range(turns)]

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o644) for p in self.paths]
        try:
            while True:
                for fd in fds:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue
                    try:
                        yield
                    finally:
                        fcntl.flock(fd, fcntl.LOCK_UN)
                    return
                time.sleep(POLL_S)
        finally:
            for fd in fds:
                os.close(fd)


def spec(prefix: str, turns: int) -> str:
    return f"{prefix},{turns}"


def from_env() -> InitGate | None:
    """The gate the runner set for this worker, or None (no gate: one cell at a time, or `measure`)."""
    value = os.environ.get(ENV_GATE)
    if not value:
        return None
    prefix, _, turns = value.rpartition(",")
    return InitGate(prefix, int(turns))
