"""`run`'s work: measure a run's cells (tracker.runner.pool) and record them in asv's results."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tracker.errors import ToolError
from tracker.measure.cellresult import SKIPPED, CellResult
from tracker.measure.hostinfo import host_info
from tracker.publish import units
from tracker.runner.config import RunConfig
from tracker.runner.forkserver import ForkServer
from tracker.runner.plan import CellId
from tracker.runner.pool import measure_cells
from tracker.runner.progress import Progress
from tracker.runner.remaining import planned
from tracker.store import asvfiles, remove
from tracker.store.cells import CellStore, RunKey, torch_version


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


def run_suite(cells: list[CellId], cfg: RunConfig, conf: Any, date_ms: int, out: TextIO | None = None) -> RunOutcome:
    """Measure `cells` (resuming from the store) and record them in asv's results for (machine, commit). What an
    interrupted `rm` left in the store is rolled back or finished first, so the run resumes from what it should.
    `out`: where progress goes (default: sys.stderr)."""
    start, out = time.monotonic(), out or sys.stderr
    for line in remove.finish_interrupted(conf.results_dir, cfg.store_root):
        print(line, file=out, flush=True)
    server = ForkServer()
    server.start_in_background()  # it imports while asv discovers the suite
    try:
        discovered = asvfiles.suite(conf, sys.executable, cfg.commit)  # before measuring: it can fail
        store = CellStore(cfg.store_root, RunKey(cfg.machine, cfg.commit, torch_version()))
        for path, why in store.damaged():
            print(f"warning: {path}: {why}; not used, its cell is measured again", file=out, flush=True)
        total = planned(cells, cfg, store)
        done = sum(store.replicate(c.preset, c.workload, c.mode) is not None for c in cells)
        counts = sorted(n for c in cells if (n := cfg.replicates_of(c)) > 1)
        each = "-".join(dict.fromkeys(map(str, counts[:1] + counts[-1:])))  # "3", or "4-6" for a confirmation
        print(f"{units.count(len(cells), 'cell')} ({done} already measured for this commit, machine and torch): "
              f"{units.count(total, 'measurement')} to make, {cfg.jobs} at a time"
              + (f"; {units.count(len(counts), 'cell gets', 'cells get')} {each} compiles each" if counts else ""),
              file=out, flush=True)
        progress = Progress(total, out)
        measured = measure_cells(cells, cfg, store, progress, server)
    finally:
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
