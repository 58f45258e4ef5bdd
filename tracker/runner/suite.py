"""`run`'s work: measure a run's cells (tracker.runner.pool) and record them in asv's results."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tracker.errors import ToolError
from tracker.measure.cellresult import SKIPPED, CellResult
from tracker.measure.gpulock import ENV_SETTLE_MS
from tracker.measure.hostinfo import host_info
from tracker.publish import units
from tracker.runner import policy
from tracker.runner.config import RunConfig
from tracker.runner.forkserver import BASE, COMPILER, ForkServer
from tracker.runner.plan import CellId
from tracker.runner.pool import measure_cells
from tracker.runner.progress import Progress
from tracker.runner.remaining import planned
from tracker.runner.workerenv import timing_cpus, usable_cpus
from tracker.store import asvfiles, remove
from tracker.store.cells import CellStore, RunKey, torch_version
from workloads.modes import COMPILED


class NothingMeasured(ToolError):
    """Every cell of a run was skipped (the presets need a GPU this host lacks, say): a run with nothing in it is
    not recorded, since it would stand as the latest run while holding no measurement."""


@dataclass
class RunOutcome:
    cells: dict[CellId, CellResult]
    results_file: Path | None
    wall_s: float

    def count(self, status: str) -> int:
        return sum(1 for c in self.cells.values() if c.status == status)


class _Discovery:
    """asv's discovery of the suite (a process importing it, seconds). Where the GPUs' timing cores are kept free
    (tracker.runner.workerenv.timing_cpus) it is made off them while the cells are measured, like the compiling
    workers; elsewhere (a CPU run, a small host) before, since it would slow the timings. What it raises stops the
    measuring at once (`check`), so an environment that cannot import the suite still fails in seconds; what was
    measured is kept."""

    def __init__(self, conf: Any, cfg: RunConfig) -> None:
        self._answer: tuple[Any, Any] | None = None
        self._error: BaseException | None = None
        self._keep_off = {c for k in range(max(1, len(cfg.gpus))) for c in timing_cpus(cfg, k)}
        self._thread = threading.Thread(target=self._discover, args=(conf, cfg.commit), daemon=True,
                                        name="asv-discovery")
        if self._keep_off:
            self._thread.start()
        else:
            self._discover(conf, cfg.commit)
            self.check()

    def _discover(self, conf: Any, commit: str) -> None:
        if self._keep_off and hasattr(os, "sched_setaffinity"):
            # This thread's own mask (Linux): inherited by the process asv starts, not by the measuring threads
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, set(usable_cpus()) - self._keep_off)
        try:
            self._answer = asvfiles.suite(conf, sys.executable, commit)
        except BaseException as e:  # handed to the measuring thread, which raises it
            self._error = e

    def check(self) -> None:
        if self._error is not None:
            raise self._error

    def result(self) -> tuple[Any, Any]:
        if self._thread.is_alive():
            self._thread.join()
        self.check()
        assert self._answer is not None
        return self._answer


def plan_line(cells: list[CellId], cfg: RunConfig, done: int, total: int) -> str:
    """What a run is about to do, in one line: its cells, measurements, parallelism, compiles, and a settle of
    autotuning where one was asked for (it makes compiles dearer)."""
    counts = sorted(n for c in cells if (n := cfg.replicates_of(c)) > 1)
    each = "-".join(dict.fromkeys(map(str, counts[:1] + counts[-1:])))  # "3", or "4-6" for a confirmation
    settle_s, after_s = policy.autotune_settle()
    after = f" of {1000 * after_s:g} ms or more" if after_s else ""
    return (f"{units.count(len(cells), 'cell')} ({done} already measured for this commit, machine and torch): "
            f"{units.count(total, 'measurement')} to make, {cfg.jobs} at a time"
            + (f"; {units.count(len(counts), 'cell gets', 'cells get')} {each} compiles each" if counts else "")
            + (f"; autotuning settles the GPU {1000 * settle_s:g} ms a choice after another process's hold{after} "
               f"({ENV_SETTLE_MS})" if settle_s and any(c.mode in COMPILED for c in cells) else ""))


def run_suite(cells: list[CellId], cfg: RunConfig, conf: Any, date_ms: int, out: TextIO | None = None,
              server: ForkServer | None = None) -> RunOutcome:
    """Measure `cells` (resuming from the store) and record them in asv's results for (machine, commit). What an
    interrupted `rm` left in the store is rolled back or finished first, so the run resumes from what it should.
    `out`: where progress goes (default: sys.stderr); `server`: the fork server to measure from, the caller's to
    close (one started before the run's own imports, say); by default one of its own."""
    start, out = time.monotonic(), out or sys.stderr
    for line in remove.finish_interrupted(conf.results_dir, cfg.store_root):
        print(line, file=out, flush=True)
    own_server = server is None
    if server is None:
        server = ForkServer(BASE)
        server.start_in_background()  # it imports while asv discovers the suite
    if any(c.mode in COMPILED for c in cells):
        server.preload_more(COMPILER)
    discovering = _Discovery(conf, cfg)
    try:
        store = CellStore(cfg.store_root, RunKey(cfg.machine, cfg.commit, torch_version()))
        for path, why in store.damaged():
            print(f"warning: {path}: {why}; not used, its cell is measured again", file=out, flush=True)
        total = planned(cells, cfg, store)
        done = sum(store.replicate(c.preset, c.workload, c.mode) is not None for c in cells)
        print(plan_line(cells, cfg, done, total), file=out, flush=True)
        progress = Progress(total, out)
        measured = measure_cells(cells, cfg, store, progress, server, discovering.check)
        discovered = discovering.result()
    finally:
        if own_server:
            server.close()
    if cfg.jobs > 1 and (share := progress.lock_share()):
        print(share, file=out, flush=True)
    cell_list = list(measured.values())
    if cell_list and all(c.status == SKIPPED for c in cell_list):
        cells_were = "the one cell was" if len(cell_list) == 1 else f"all {len(cell_list)} cells were"
        raise NothingMeasured(f"{cells_were} skipped ({cell_list[0].reason}): "
                              f"nothing was recorded in {conf.results_dir}; pick cells this host can measure (`list` "
                              "names the presets)")
    host = asvfiles.host_of(cell_list)
    if host is None:  # every cell was skipped: describe this host
        host = host_info(cfg.device).as_dict()
    results_file = asvfiles.record_run(conf, sys.executable, cfg.machine, cfg.commit, date_ms, cell_list, host,
                                       discovered=discovered)
    return RunOutcome(measured, results_file, time.monotonic() - start)
