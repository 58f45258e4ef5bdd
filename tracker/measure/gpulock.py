"""A cross-process lock around every GPU timing, so parallel cells never time while another cell does.

The parallel runner overlaps the CPU-bound parts of cells (interpreter start, imports, tracing, inductor
and Triton compilation) but GPU measurement must never overlap other GPU work. Autotuning times kernels
on the GPU too (max-autotune's GEMM choices, the runtime autotuner of reductions), so inductor's
benchmarker is patched to take the same lock: its numbers are measurements and decide which kernel runs.

Not overlapping is not enough for autotuning: right after another process's heavy work on the GPU, a config's
brief benchmark runs in a GPU state the config would not meet alone, and autotuning settles on another config than it
does on a quiet GPU (docs/verdicts.md, "Autotuning beside a busy GPU"). With a settle time (ENV_SETTLE_MS), each of
autotuning's choices is benchmarked in one hold of the lock, and a hold of autotuning that follows another process's
(one of ENV_SETTLE_AFTER_MS or more, where that is set) first waits that long, holding the lock, so the GPU is idle
before it times. Each release leaves the holder's pid and how long it held in the lock file, which is how the next
holder knows.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import math
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
# Milliseconds autotuning waits before a choice, holding the lock, after another process held it (unset or 0: none).
ENV_SETTLE_MS = "COMPILE_BASELINES_AUTOTUNE_SETTLE_MS"
# Only after another process held it this many milliseconds or more (unset or 0: after any hold).
ENV_SETTLE_AFTER_MS = "COMPILE_BASELINES_AUTOTUNE_SETTLE_AFTER_MS"
HOLDER_BYTES = 16  # "PID MS": the last holder and how long it held, at the start of the lock file
_MOST_MS = 9_999_999  # what fits in HOLDER_BYTES beside a pid


def parse_cpus(text: str | None) -> frozenset[int]:
    return frozenset(int(x) for x in text.split(",") if x.strip()) if text else frozenset()


def milliseconds(name: str, text: str | None) -> float:
    """The value `text` of environment variable `name`: milliseconds, a number from 0 (ValueError otherwise); unset
    or empty: 0."""
    text = (text or "").strip()
    if not text:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name}={text!r}: milliseconds, a number from 0")
    return value


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
    SPAN_GAP_S and without waiting merged into it. `settle_s`: what a hold asked `settled` waits after another
    process's hold of `settle_after_s` or more (the module's docstring), counted in `settled_s` (and in `held_s`)."""

    def __init__(self, path: str, timing_cpus: frozenset[int] = frozenset(), settle_s: float = 0.0,
                 settle_after_s: float = 0.0) -> None:
        self.path = path
        self.timing_cpus = timing_cpus
        self.settle_s = settle_s
        self.settle_after_s = settle_after_s
        self.held_s = 0.0
        self.settled_s = 0.0
        self.wait_s = 0.0
        self._since = 0.0
        self._asked_at = 0.0
        self.spans: list[list[float]] = []
        self._saved_cpus: set[int] | None = None
        self._depth = 0
        self._fd: int | None = None
        self._mutex = threading.RLock()

    @contextlib.contextmanager
    def held(self, settled: bool = False) -> Iterator[None]:
        with self._mutex:
            if self._depth == 0:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                asked, self._asked_at = time.perf_counter(), time.time()
                fcntl.flock(self._fd, fcntl.LOCK_EX)
                self._since = time.perf_counter()
                self.wait_s += self._since - asked
                if settled and self.settle_s > 0 and self._others_last_hold_s() >= self.settle_after_s:
                    time.sleep(self.settle_s)
                    self.settled_s += self.settle_s
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
                    held = time.perf_counter() - self._since
                    holder = f"{os.getpid()} {min(round(held * 1000), _MOST_MS)}"
                    with contextlib.suppress(OSError):  # advisory: a holder it misses only goes unsettled
                        os.pwrite(self._fd, holder.ljust(HOLDER_BYTES).encode(), 0)
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                    os.close(self._fd)
                    self._fd = None
                    self.held_s += held
                    self._span(held)

    def _others_last_hold_s(self) -> float:
        """How long the last holder of this lock held it, where that was another process (infinite where it did not
        say); -1 where it was this process or none is known."""
        try:
            holder = os.pread(self._fd, HOLDER_BYTES, 0).split() if self._fd is not None else []
        except OSError:
            return -1.0
        if not holder or not holder[0].isdigit() or int(holder[0]) == os.getpid():
            return -1.0
        return int(holder[1]) / 1000 if len(holder) > 1 and holder[1].isdigit() else math.inf

    def restart(self) -> None:
        """Count from now: a process's next measurement records its own holds and waits."""
        self.held_s = self.wait_s = self.settled_s = 0.0
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
    """`fn`, one of autotuning's benchmarks, under the lock, settled (GpuLock.held)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with lock.held(settled=True):
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
                patched += _lock_method(lock, cls, attr)
    if compiler and lock.settle_s > 0:
        patched += _hold_choices_whole(lock)
    try:
        import triton.testing
    except ImportError:
        return patched
    if not getattr(triton.testing.do_bench, "__compile_baselines_locked__", False):
        triton.testing.do_bench = _locked(lock, triton.testing.do_bench)
        patched.append("triton.testing.do_bench")
    return patched


def _hold_choices_whole(lock: GpuLock) -> list[str]:
    """Each of autotuning's choices (one kernel's configs, one GEMM's candidates) benchmarked in one hold of `lock`,
    settled once before it: its benchmarks all time on a GPU no other process used since the settle, for one settle a
    choice rather than one a benchmark. Returns what was patched."""
    patched = []
    with contextlib.suppress(ImportError):
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner

        patched += _lock_method(lock, CachingAutotuner, "benchmark_all_configs")
    with contextlib.suppress(ImportError):
        from torch._inductor.select_algorithm import AlgorithmSelectorCache

        patched += _lock_method(lock, AlgorithmSelectorCache, "benchmark_choices")
    return patched


def _lock_method(lock: GpuLock, cls: type, attr: str) -> list[str]:
    """`cls.attr` (a function or a classmethod) run under `lock`, unless it already is; its name where patched."""
    fn = cls.__dict__.get(attr)
    inner = fn.__func__ if isinstance(fn, classmethod) else fn
    if not callable(inner) or getattr(inner, "__compile_baselines_locked__", False):
        return []
    locked = _locked(lock, inner)
    setattr(cls, attr, classmethod(locked) if isinstance(fn, classmethod) else locked)
    return [f"{cls.__name__}.{attr}"]


def reserved_cpus(lock: GpuLock) -> frozenset[int]:
    """The cores to keep this process off: every GPU's timing cores where the runner listed them, else the lock's."""
    return parse_cpus(os.environ.get(ENV_RESERVED_CPUS)) or lock.timing_cpus


def settle_from_env() -> tuple[float, float]:
    """The settle time and the shortest hold of another process it follows, in seconds (ENV_SETTLE_MS,
    ENV_SETTLE_AFTER_MS); ValueError for a value that is not milliseconds."""
    return (milliseconds(ENV_SETTLE_MS, os.environ.get(ENV_SETTLE_MS)) / 1000,
            milliseconds(ENV_SETTLE_AFTER_MS, os.environ.get(ENV_SETTLE_AFTER_MS)) / 1000)


def from_env() -> GpuLock | None:
    """The lock the runner set (ENV_LOCK), its timing cores and settle; None where it set none. The runner checked the
    settle's variables before starting any worker (tracker.runner.policy.autotune_settle)."""
    path = os.environ.get(ENV_LOCK)
    if not path:
        return None
    settle_s, after_s = settle_from_env()
    return GpuLock(path, parse_cpus(os.environ.get(ENV_TIMING_CPUS)), settle_s, after_s)
