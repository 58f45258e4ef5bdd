"""A run's configuration: where it records, what it measures with, how many compiles each cell gets, on which GPUs."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from tracker.measure.settings import Settings
from tracker.runner.plan import CellId
from workloads.modes import AUTOTUNED_MODES


@dataclass(frozen=True)
class RunConfig:
    store_root: Path
    machine: str
    commit: str
    jobs: int = 1
    device: str | None = None
    settings: Settings = field(default_factory=Settings)
    cell_timeout_s: float = 1800.0  # the process is killed past this (asv's benchmark timeout too)
    warm_cache_dir: Path | None = None  # None: a fresh compile cache per cell (cold compile times)
    retry_failed: bool = False
    # Each cell of `replicated_modes` (all modes: None) is measured in this many fresh processes, each compiling
    # anew; the results record the best and the spread (tracker.store.cells.combine).
    replicates: int = 1
    replicated_modes: tuple[str, ...] | None = AUTOTUNED_MODES
    # Cells measured in a number of processes of their own, whatever `replicates` says (a confirmation's candidates)
    replicates_per_cell: dict[CellId, int] = field(default_factory=dict)
    # The GPUs to measure on, as CUDA_VISIBLE_DEVICES names them (tracker.runner.gpus); none: the process's default
    # device (a CPU run, a confirmation).
    gpus: tuple[str, ...] = ()
    # Each GPU's memory that the measurements on it may reserve together (tracker.runner.memledger); None: not known,
    # not counted.
    memory_budget: int | None = None
    # Runs measuring on the same GPUs at once, this one included (a PR round's two sides): this one's scheduler plans
    # within its share of memory_budget (`planned_memory`), the ledger still holds the whole budget for all of them.
    runs_per_gpu: int = 1
    # Processes of one GPU that create their CUDA context at once (tracker.measure.cudainit); 0: no limit.
    cuda_inits: int = 4
    # A cell's further compiles that run at once, once its first is in (tracker.runner.remaining.next_replicate)
    together: int = 1
    # Whether a process may stay, its measurement stored, for further compiles of other cells (tracker.runner.resident)
    stay: bool = True

    @property
    def planned_memory(self) -> int | None:
        """The memory this run's scheduler shares out on each GPU: its share of the budget where runs share the GPU."""
        return None if self.memory_budget is None else self.memory_budget // max(1, self.runs_per_gpu)

    def replicates_of(self, cell: CellId) -> int:
        if cell in self.replicates_per_cell:
            return max(1, self.replicates_per_cell[cell])
        if self.replicated_modes is None or cell.mode in self.replicated_modes:
            return max(1, self.replicates)
        return 1

    def settings_of(self, cell: CellId) -> Settings:
        """A replicated cell times each replicate for its share of the timing budget: the cell's timing costs what
        one measurement's does, and what differs between compiles is far larger than what more samples resolve."""
        n = self.replicates_of(cell)
        return self.settings if n == 1 else replace(self.settings, rep_ms=self.settings.rep_ms / n)

