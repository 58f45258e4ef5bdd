"""A run's progress: one line per finished measurement, and at the end how busy each GPU's lock was."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from tracker.measure.cellresult import FAILED, OK, CellResult
from tracker.runner.plan import Job

# Set (to anything but "" or "0") by a caller that shows the run's progress among others' (`pr`): the run prints its
# progress and its outcome, not its summary
PROGRESS_ONLY = "COMPILE_BASELINES_PROGRESS_ONLY"


class Progress:
    """One line per finished cell: counts, failures, elapsed and ETA; at the end, how GPU-bound the run was."""

    def __init__(self, total: int, out: TextIO | None = None) -> None:
        # sys.stderr when called, not when imported: the CLI's stream, which shows controls visibly (tracker.cli)
        self.total, self.done, self.failed, self.out = total, 0, 0, out or sys.stderr
        self.start = time.monotonic()
        self._lock = threading.Lock()
        self._failed: dict[Job, bool] = {}  # a measurement re-run alone replaces its first result
        self._held_s: dict[Job, float] = {}  # seconds each measurement held the GPU lock
        self._gpu_held_s: dict[str, float] = {}  # the same, summed per GPU of a run on several

    def cell_done(self, job: Job, result: CellResult) -> None:
        with self._lock:
            self._failed[job] = result.status == FAILED
            self.done, self.failed = len(self._failed), sum(self._failed.values())
            self._held_s[job] = result.lock_held_s or 0.0
            if result.gpu_index is not None:
                gpu = str(result.gpu_index)
                self._gpu_held_s[gpu] = self._gpu_held_s.get(gpu, 0.0) + self._held_s[job]
            elapsed = time.monotonic() - self.start
            eta = elapsed / self.done * (self.total - self.done)
            status = result.status or "?"
            detail = (f"{result.median_ms:.4f} ms, compile {result.compile_s:.1f} s" if status == OK
                      else result.reason[:90])
            print(f"[{self.done:>{len(str(self.total))}}/{self.total}] {job}: {status} {detail} | "
                  f"{self.failed} failed | {_fmt(elapsed)} elapsed, ETA {_fmt(eta)}", file=self.out, flush=True)

    def expect(self, more: int) -> None:
        """More (or, negative, fewer) measurements than planned: a cell whose first measurement failed asks for none of
        its further compiles."""
        with self._lock:
            self.total += more

    def lock_share(self) -> str:
        """The GPU lock's busy share of the wall time (each GPU's, with several): near 100% the GPU is the limit and
        more -j cannot help; well below it, compilation is, and more cores (or shards on more hosts) would."""
        held, wall = sum(self._held_s.values()), time.monotonic() - self.start
        if not held or not wall:
            return ""
        line = (f"GPU lock held {held:.0f} s of {wall:.0f} s ({held / wall:.0%}), "
                f"{held / len(self._held_s):.2f} s a cell")
        if len(self._gpu_held_s) > 1:
            line += "; per GPU: " + ", ".join(f"{gpu} {s:.0f} s ({s / wall:.0%})"
                                               for gpu, s in sorted(self._gpu_held_s.items()))
        return line


def _fmt(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


