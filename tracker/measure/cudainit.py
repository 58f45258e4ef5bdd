"""Turns a measuring process takes around its CUDA start: how many processes of one GPU create their CUDA context at
once, and how many of a run's on one GPU go on past it.

Context creation is driver work, and many processes creating contexts at once on a host of several GPUs took many
times as long each as on a host of one (docs/runner.md has the figures). The runner gives each GPU a few turns to
create one (`Turns`, files under flock beside its GPU lock); a measurement takes one for its cuda_init phase and
records its wait for it as the phase cuda_init_wait (tracker.measure.harness._start_cuda), so a run's cell store shows
the queue apart from the work.

A run may also start a few processes a GPU ahead of its measuring ones, so that their CUDA start is done by the time
one of them may measure: each takes one of the run's turns on its GPU once CUDA is started and holds it to its end
(ENV_TURNS, the phase turn_wait), so that no more than the run's workers a GPU compile and measure at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator

ENV_GATE = "COMPILE_BASELINES_CUDA_INIT_GATE"  # "PATH_PREFIX,N": N turns, the files PATH_PREFIX-0 ... -(N-1)
ENV_TURNS = "COMPILE_BASELINES_TURNS"  # likewise: the run's turns on this GPU to go on past CUDA's start
POLL_S = 0.005


class Turns:
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


def from_env(name: str = ENV_GATE) -> Turns | None:
    """The turns the runner set for this worker in `name` (ENV_GATE: to create the CUDA context; ENV_TURNS: to go
    on past it), or None (none set: one cell at a time, or `measure`)."""
    value = os.environ.get(name)
    if not value:
        return None
    prefix, _, turns = value.rpartition(",")
    return Turns(prefix, int(turns))
