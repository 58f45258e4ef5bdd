"""The metrics a cell reports, one registry: everything that names a metric derives from it.

One measurement of a cell (tracker.measure.harness) feeds every metric; asv records each as its own
benchmark, `track_<name>` of baselines.Baseline and candidates.Candidate, with the metric's unit. The cell
store hands asv the value (tracker.store.cells.metric_value), the results table reads it back into the
metric's column, the study importer and the publisher describe it from here. Adding a metric is one entry
below plus the measurement that stores its value in the cell.

Exactly one metric is sampled (latency): asv computes its median, confidence interval and quartiles from the
samples, its row says whether a cell was measured, failed or skipped, and the table's statistics columns
(ci_low, ci_high, q25, q75, n_samples, samples) are its.

Standard library only: asv imports the benchmark suite, and with it this module, in every benchmark process.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class StoredCell(Protocol):
    """What a metric reads of a stored cell (tracker.measure.cellresult.CellResult, its replicates combined)."""

    @property
    def samples_ms(self) -> list[float]: ...
    @property
    def median_ms(self) -> float | None: ...
    @property
    def compile_s(self) -> float | None: ...
    @property
    def peak_mem_bytes(self) -> int | None: ...
    @property
    def compiles_ms(self) -> list[float] | None: ...
    @property
    def compiles_kept_ms(self) -> list[float] | None: ...


@dataclass(frozen=True)
class Metric:
    name: str  # asv benchmark `track_<name>`
    unit: str  # asv's unit of that benchmark
    column: str  # the results table's column (for the sampled metric: its median)
    value: Callable[[StoredCell], Any]  # a measured (ok) stored cell -> the value; samples when `sampled`
    sampled: bool = False  # the value is a list of samples, asv keeps them and computes the statistics
    absent: str | None = None  # when set, a value of None is asv's n/a (skipped) with this reason


def _peak_mib(cell: StoredCell) -> float | None:
    peak = cell.peak_mem_bytes
    return None if peak is None else peak / 2**20


def _compiles(cell: StoredCell) -> list[float]:
    """The medians of a cell's replicates (fresh processes, each compiling anew), the recorded one among them."""
    if cell.compiles_ms:
        return list(cell.compiles_ms)
    return [cell.median_ms if cell.median_ms is not None else statistics.median(cell.samples_ms)]


def _kept(cell: StoredCell) -> list[float]:
    """The compiles a cell's noise is read from: all of them but a gross outlier (tracker.stats.set_aside, applied
    by tracker.store.cells.combine to every cell read from the store, whatever its format); a measurement not
    combined (benchmarks/baselines.py hands asv one just measured): its one compile."""
    return list(cell.compiles_kept_ms) if cell.compiles_kept_ms else _compiles(cell)


def _log_sd(cell: StoredCell) -> float | None:
    kept = _kept(cell)
    return statistics.stdev(math.log(x) for x in kept) if len(kept) > 1 else None


# latency is the best replicate's (tracker.store.cells.combine); the compiles_* metrics give the spread over them
METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("latency", "ms", "median_ms", lambda cell: cell.samples_ms, sampled=True),
    Metric("compile_time", "s", "compile_s", lambda cell: cell.compile_s),
    Metric("peak_memory", "MiB", "peak_mem_mib", _peak_mib, absent="peak device memory is recorded on CUDA only"),
    Metric("compiles", "unit", "compiles", lambda cell: len(_compiles(cell))),
    # the spread over compiles: the kept ones' (a gross outlier, a process disturbed while it ran, set aside)
    Metric("compiles_median", "ms", "compiles_median_ms", lambda cell: statistics.median(_kept(cell))),
    Metric("compiles_max", "ms", "compiles_max_ms", lambda cell: max(_kept(cell))),
    # the change test's unit: the kept compiles' geometric mean and the sd of their natural logs
    Metric("compiles_mean", "ms", "compiles_mean_ms",
           lambda cell: math.exp(statistics.fmean(math.log(x) for x in _kept(cell)))),
    Metric("compiles_log_sd", "unit", "compiles_log_sd", _log_sd, absent="one compile: no spread"),
    Metric("compiles_set_aside", "unit", "compiles_set_aside", lambda cell: len(_compiles(cell)) - len(_kept(cell))),
)}


def sampled() -> Metric:
    """The one sampled metric: its asv row gives each cell's status and the table's statistics."""
    (metric,) = (m for m in METRICS.values() if m.sampled)
    return metric


def unsampled() -> list[Metric]:
    """The other metrics, in registry order: one number each per cell."""
    return [m for m in METRICS.values() if not m.sampled]


def benchmark_names(benchmark_class: str) -> dict[str, str]:
    """asv's benchmark name of every metric of a class: {"latency": "baselines.Baseline.track_latency", ...}."""
    return {m.name: f"{benchmark_class}.track_{m.name}" for m in METRICS.values()}
