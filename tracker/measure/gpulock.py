"""A cross-process lock around every GPU timing, so parallel cells never time while another cell does.

The parallel runner overlaps the CPU-bound parts of cells (interpreter start, imports, tracing, inductor
and Triton compilation) but GPU measurement must never overlap other GPU work. Autotuning times kernels
on the GPU too (max-autotune's GEMM choices, the runtime autotuner of reductions), so inductor's
benchmarker is patched to take the same lock: its numbers are measurements and decide which kernel runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

ENV_LOCK = "COMPILE_BASELINES_GPU_LOCK"  # path of the lock file; unset: no locking (one cell at a time)
# Cores kept for the lock holder: launch-bound cells time the host's CPU too, so the process that times
# runs on cores no compiling neighbour may use ("2,3"; unset: no pinning).
ENV_TIMING_CPUS = "COMPILE_BASELINES_TIMING_CPUS"
# Every GPU's timing cores in a run on several (unset: this lock's own): no compiling worker may use any of them.
ENV_RESERVED_CPUS = "COMPILE_BASELINES_RESERVED_CPUS"
# Holds closer than this to the one before (autotuning's benchmarks, one after another) count as one span.
SPAN_GAP_S = 0.01


def parse_cpus(text: str | None) -> frozenset[int]:
    return frozenset(int(x) for x in text.split(",") if x.strip()) if text else frozenset()


def keep_off_timing_cpus(timing_cpus: frozenset[int]) -> None:
    """Move this process (and the compile workers it will start) off the timing cores."""
    if timing_cpus and hasattr(os, "sched_setaffinity"):
        rest = os.sched_getaffinity(0) - timing_cpus
        if rest:
            os.sched_setaffinity(0, rest)


class GpuLock:
    """flock on a file; re-entrant within a process (our do_bench runs inside the cell's held lock).

    Counts the seconds this process held it and waited for it (the GPU-bound share of a parallel run), and when:
    `spans`, [asked, got, released] in seconds since the epoch, a hold that follows the one before within
    SPAN_GAP_S and without waiting merged into it."""

    def __init__(self, path: str, timing_cpus: frozenset[int] = frozenset()) -> None:
        self.path = path
        self.timing_cpus = timing_cpus
        self.held_s = 0.0
        self.wait_s = 0.0
        self._since = 0.0
        self._asked_at = 0.0
        self.spans: list[list[float]] = []
        self._saved_cpus: set[int] | None = None
        self._depth = 0
        self._fd: int | None = None
        self._mutex = threading.RLock()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self._mutex:
            if self._depth == 0:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                asked, self._asked_at = time.perf_counter(), time.time()
                fcntl.flock(self._fd, fcntl.LOCK_EX)
                self._since = time.perf_counter()
                self.wait_s += self._since - asked
                if self.timing_cpus:
                    # pid 0 is the calling thread: the one that launches the timed kernels
                    self._saved_cpus = os.sched_getaffinity(0)
                    os.sched_setaffinity(0, self.timing_cpus)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    if self._saved_cpus:
                        os.sched_setaffinity(0, self._saved_cpus)
                        self._saved_cpus = None
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                    os.close(self._fd)
                    self._fd = None
                    held = time.perf_counter() - self._since
                    self.held_s += held
                    self._span(held)


    def restart(self) -> None:
        """Count from now: a process's next measurement records its own holds and waits."""
        self.held_s = self.wait_s = 0.0
        self.spans = []

    def _span(self, held: float) -> None:
        released = time.time()
        got = released - held
        last = self.spans[-1] if self.spans else None
        if last is not None and self._asked_at - last[2] < SPAN_GAP_S and got - self._asked_at < SPAN_GAP_S:
            last[2] = released
        else:
            self.spans.append([self._asked_at, got, released])

    def spans_after(self, start: float) -> list[list[float]]:
        """`spans` as seconds after `start` (a measurement's started_at), to the millisecond."""
        return [[round(x - start, 3) for x in span] for span in self.spans]


def _locked(lock: GpuLock, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with lock.held():
            return fn(*args, **kwargs)

    wrapper.__compile_baselines_locked__ = True  # type: ignore[attr-defined]
    return wrapper


def install(lock: GpuLock, compiler: bool = True) -> list[str]:
    """Route Triton's GPU benchmarking through `lock`, and inductor's autotuning's with `compiler` (a cell compiled
    by torch.compile; one that is not spares the compiler's import); returns what was patched."""
    patched = []
    benchmarking = None
    if compiler:
        with contextlib.suppress(ImportError):
            from torch._inductor.runtime import benchmarking
    if benchmarking is not None:
        for cls in vars(benchmarking).values():
            if not isinstance(cls, type):
                continue
            for attr in ("benchmark_gpu", "benchmark_gpu_with_cuda_graph"):
                fn = cls.__dict__.get(attr)
                if callable(fn) and not getattr(fn, "__compile_baselines_locked__", False):
                    setattr(cls, attr, _locked(lock, fn))
                    patched.append(f"{cls.__name__}.{attr}")
    try:
        import triton.testing
    except ImportError:
        return patched
    if not getattr(triton.testing.do_bench, "__compile_baselines_locked__", False):
        triton.testing.do_bench = _locked(lock, triton.testing.do_bench)
        patched.append("triton.testing.do_bench")
    return patched


def reserved_cpus(lock: GpuLock) -> frozenset[int]:
    """The cores to keep this process off: every GPU's timing cores where the runner listed them, else the lock's."""
    return parse_cpus(os.environ.get(ENV_RESERVED_CPUS)) or lock.timing_cpus


def from_env() -> GpuLock | None:
    path = os.environ.get(ENV_LOCK)
    return GpuLock(path, parse_cpus(os.environ.get(ENV_TIMING_CPUS))) if path else None
