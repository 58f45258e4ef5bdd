"""What each measurement of a run is expected to cost: from what the cell store recorded for its cell before (any
run under the store's root: its process's seconds, its holds of the GPU lock, its compile, its CUDA init, its peak
memory), else a prior from its mode (workloads/modes.py's cost). The scheduler (tracker.runner.schedule) orders and
places the measurements by it, and reserves GPU memory by it (tracker.runner.memledger).

A recorded figure is taken without the waits of its run (for the lock, for a CUDA init turn, for memory), which
depend on what ran beside it, not on the cell: the autotuning benchmarks' waits inside a compile are read from the
measurement's lock spans where it has them, else estimated as the lock waits its phases do not account for.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tracker.measure.cellresult import OK, SKIPPED, CellResult
from tracker.runner.plan import CellId
from tracker.store import formats
from tracker.store.cells import names_its_cell
from workloads import registry as workload_registry
from workloads.kernels import registry as kernel_registry
from workloads.modes import BY_NAME
from workloads.names import is_plugin_workload

GiB = 2**30
# A reservation is the recorded peak (the process's over the whole measurement where recorded, else the timed region's:
# tracker.measure.harness) with this much room over it, and what a process holds beside its tensors (its CUDA
# context, cuBLAS's workspace).
PEAK_HEADROOM = 1.25
PROCESS_BYTES = 1 * GiB
PRIOR_RESERVE = 4 * GiB  # a cell never measured: its peak is not known (most cells of the suite take ~1 GiB)
# Priors of the GPU lock's seconds a measurement holds, and its CUDA init: about what the median measurement of the
# one-GPU runs took (docs/runner.md)
PRIOR_LOCK_S = 1.0
PRIOR_AUTOTUNE_LOCK_S = 1.0  # more for the autotuned modes where GEMM or conv templates are benchmarked
PRIOR_INIT_S = 0.4
PRIOR_OVERHEAD_S = 4.0  # a compiled cell's seconds beside its compile: init, inputs, warm-up, timing
# The phases that hold the GPU lock (tracker.measure.harness), an eager cell's first call among them
LOCKED_PHASES = ("launch_floor", "inputs", "warmup", "host_time", "timing")
# The workloads whose autotuned modes benchmark GEMM or convolution templates (their tags say so)
_AUTOTUNED_WORKLOADS = frozenset(w.name for w in workload_registry.WORKLOADS if {"gemm", "conv"} & set(w.tags))


@dataclass(frozen=True)
class Cost:
    """One measurement: its process's seconds (`wall_s`, without waiting for the lock, a CUDA init turn or memory),
    of them holding the GPU lock (`lock_s`), compiling (`compile_s`, its first call) and creating its CUDA context
    (`init_s`), and its peak GPU memory in bytes (None: not known). `recorded`: from a stored measurement."""

    wall_s: float
    lock_s: float
    compile_s: float
    init_s: float = PRIOR_INIT_S
    peak_bytes: int | None = None
    recorded: bool = False

    @property
    def reserve_bytes(self) -> int:
        """What the measurement reserves of its GPU's memory (tracker.runner.memledger)."""
        if self.peak_bytes is None:
            return PRIOR_RESERVE
        return int(self.peak_bytes * PEAK_HEADROOM) + PROCESS_BYTES


def autotunes_templates(workload: str) -> bool:
    if workload in _AUTOTUNED_WORKLOADS:
        return True
    return is_plugin_workload(workload) and bool({"gemm", "conv"} & set(workload_registry.get(workload).tags))


def expected_cost(cell: CellId) -> float:
    """A cell's prior seconds: its mode's cost, more where an autotuned mode benchmarks GEMM or conv templates."""
    if kernel_registry.candidate_name(cell.mode) is not None:
        return 8.0  # eager inputs plus a kernel's JIT compile
    mode = BY_NAME.get(cell.mode)
    if mode is None:
        return 20.0
    cost = mode.cost
    if mode.autotuned and autotunes_templates(cell.workload):
        cost += 30.0
    return cost


def prior(cell: CellId) -> Cost:
    """The cost of a measurement of a cell no stored measurement tells of."""
    wall = expected_cost(cell)
    mode = BY_NAME.get(cell.mode)
    compiles = mode.compiled if mode is not None else kernel_registry.candidate_name(cell.mode) is not None
    lock = PRIOR_LOCK_S + (PRIOR_AUTOTUNE_LOCK_S if mode is not None and mode.autotuned
                           and autotunes_templates(cell.workload) else 0.0)
    return Cost(wall, lock, max(0.0, wall - PRIOR_OVERHEAD_S) if compiles else 0.0)


def from_record(record: CellResult) -> Cost:
    """A stored measurement's cost, its run's waits taken out (see the module's docstring)."""
    phases = {k: float(v) for k, v in (record.phase_s or {}).items() if isinstance(v, (int, float))}
    waits = (record.lock_wait_s or 0.0) + phases.get("cuda_init_wait", 0.0)
    wall = max(0.0, (record.wall_s or 0.0) - waits)
    compile_wait = _compile_waits(record, phases)
    mode = BY_NAME.get(record.mode)
    compiles = (record.compile_s or 0.0) > 0 and (mode is None or mode.compiled)
    lock = record.lock_held_s
    if lock is None:  # one cell at a time: no lock was taken, its phases say what it would have held
        lock = sum(phases.get(p, 0.0) for p in LOCKED_PHASES) + (0.0 if compiles else phases.get("first_call", 0.0))
    peak = max((p for p in (record.peak_mem_bytes, record.process_peak_bytes) if isinstance(p, (int, float))),
               default=None)
    return Cost(wall, float(lock), max(0.0, phases.get("first_call", 0.0) - compile_wait) if compiles else 0.0,
                phases.get("cuda_init", PRIOR_INIT_S), None if peak is None else int(peak),
                recorded=True)


def _compile_waits(record: CellResult, phases: dict[str, float]) -> float:
    """Seconds of its first call (the compile) that the measurement waited for the GPU lock: autotuning's benchmarks
    take it too (tracker.measure.gpulock.install)."""
    start, length = (record.phase_at or {}).get("first_call"), phases.get("first_call", 0.0)
    spans = record.lock_spans
    if start is not None and isinstance(spans, list):
        end = start + length
        return sum(max(0.0, min(got, end) - max(asked, start)) for asked, got, _ in spans)
    measured = sum(v for k, v in phases.items() if not k.endswith("_wait"))
    outside = max(0.0, (record.wall_s or 0.0) - measured)  # the locked phases' waits, and what no phase times
    return min(length, max(0.0, (record.lock_wait_s or 0.0) - outside))


class Costs:
    """The cost of each measurement: a cell's first (a cold compile) and its further ones (they reuse the first's
    Triton binaries, tracker.runner.workerenv.cache_dirs) from the records, else from the first's, else the prior."""

    def __init__(self, recorded: dict[tuple[str, str, str, bool], Cost] | None = None) -> None:
        self.recorded = dict(recorded or {})

    @classmethod
    def from_records(cls, records: Iterable[CellResult | None]) -> Costs:
        """Of ok and skipped measurements, the last of each cell's first and further ones."""
        costs = cls()
        for r in records:
            if r is not None:
                costs.learn(r)
        return costs

    @classmethod
    def from_store_root(cls, root: Path, runs: int = 5) -> Costs:
        """From the measurements of the `runs` runs under a cell store's root written last (its machines, commits
        and torch versions alike: a cell costs much the same in each), the latest of them winning."""
        dirs = sorted((d for d in root.glob("*/*/torch-*") if d.is_dir()), key=lambda d: d.stat().st_mtime)[-runs:]
        return cls.from_records(read_record(p) for d in dirs for p in sorted(d.glob("*/*/*.json")))

    def learn(self, record: CellResult) -> None:
        """What a measurement of this run has just recorded: its cell's further measurements cost (and reserve) as it
        did, not as the store's older runs or the prior said."""
        if record.status in (OK, SKIPPED) and names_its_cell(record):
            self.recorded[(record.preset, record.workload, record.mode, record.replicate_number > 1)] = (
                from_record(record))

    def of(self, cell: CellId, replicate: int = 1) -> Cost:
        key = (cell.preset, cell.workload, cell.mode)
        if replicate > 1 and (*key, True) in self.recorded:
            return self.recorded[(*key, True)]
        return self.recorded.get((*key, False)) or prior(cell)


def read_record(path: Path) -> CellResult | None:
    """A stored measurement in today's format; None where it is unreadable or of a format this tool does not read
    (a cost is a guess: the run's own cells are read, and refused, through the store)."""
    try:
        return CellResult.from_json(formats.CELL.read(json.loads(path.read_text(encoding="utf-8")), str(path)))
    except (OSError, ValueError, formats.FormatError):
        return None
