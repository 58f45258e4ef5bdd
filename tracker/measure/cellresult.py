"""One measurement of a cell as a typed record, and its JSON: the cell store's file (tracker.store.cells) is
`CellResult.to_json()`, and what reads one back is `CellResult.from_json`.

`measure_cell` (tracker.measure.harness) fills the measured fields; the runner adds where and when it ran
(replicate, GPU, lock and memory waits), the store how it keeps it (`n_samples`) and how the replicates combine
(`compiles_ms`, ...). A record read back writes the same JSON it was read from (its keys in their order, keys this
version does not know kept in `extra`), so that copying a cell (merge, a shared baseline) changes nothing of it
and records of earlier versions read as they were written.

Standard library only, no torch: asv imports the suite, and with it the cell store, in every benchmark process.
"""

from __future__ import annotations

from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

OK, FAILED, SKIPPED = "ok", "failed", "skipped"


@dataclass
class CellResult:
    preset: str
    workload: str
    mode: str  # a compile mode, or "kernel:NAME" for a kernel under test
    device: str
    status: str  # ok | failed | skipped
    reason: str = ""
    samples_ms: list[float] = field(default_factory=list)
    median_ms: float | None = None
    p25_ms: float | None = None
    p99_ms: float | None = None
    compile_s: float | None = None
    peak_mem_bytes: int | None = None  # CUDA only, during the timed region
    # CUDA only: the most the process's allocator held of the GPU at once over the whole measurement (the eager
    # reference, the compile and autotuning's benchmarks included): what it needs beside others on its GPU
    process_peak_bytes: int | None = None
    correct: bool | None = None
    error_vs_eager: float | None = None  # relative L2 error (floats) or mismatch fraction (integers)
    launch_us: float | None = None  # this host's launch floor: a one-element add under the same timer
    host_us: float | None = None  # CUDA: host (CPU) time per call, calls issued back to back
    cpu_threads: int | None = None  # CPU: the threads the cell compiled and ran with (Settings.cpu_threads)
    flush_mib: int | None = None  # CUDA: the L2 flush buffer written before each timed call
    flush_capped: bool = False  # free GPU memory allowed less flush than the host's time per call needed
    # Seconds per part of the cell ("cuda_init", "launch_floor", "inputs", "first_call", "warmup", "host_time",
    # "timing"), lock waits excluded; "cuda_init_wait": the wait for a turn to create the CUDA context. In a parallel
    # run, the seconds this process held and waited for the lock.
    phase_s: dict[str, float] = field(default_factory=dict)
    started_at: float | None = None  # when the measurement began (seconds since the epoch)
    phase_at: dict[str, float] = field(default_factory=dict)  # when each phase began, seconds after started_at
    lock_held_s: float | None = None
    lock_wait_s: float | None = None
    host: dict[str, str] = field(default_factory=dict)
    # A compile mode's generated code and chosen launch configs, hashed (tracker.measure.fingerprint)
    fingerprint: dict[str, Any] | None = None
    wall_s: float = 0.0
    # What the store and the runner add, written only when set (in this order, after the fields above).
    n_samples: int | None = None  # the samples taken; samples_ms keeps a thinned set (tracker.store.cells)
    replicate: int | None = None  # which of the cell's measurements (fresh processes, compiles); None: the first
    ended_at: float | None = None  # when the worker stored it (seconds since the epoch)
    gpu_index: str | None = None  # the GPU as CUDA_VISIBLE_DEVICES names it (the model is in `host`)
    launched_at: float | None = None  # when the runner asked for its process
    lock_spans: list[list[float]] | None = None  # each hold of the GPU lock: (asked, got, released), after started_at
    # Where autotuning's benchmarks settled the GPU after another process's hold (tracker.measure.gpulock): the
    # seconds of lock_held_s they waited; None: they did not settle
    lock_settled_s: float | None = None
    memory_wait_s: float | None = None  # the wait for its share of the GPU's memory (tracker.runner.memledger)
    # Its place among the measurements its process made (tracker.runner.resident); None: the first, a fresh process
    process_turn: int | None = None
    # The `run` that made it (an id of the runner's process): a run's measurements share its fork server, and whatever
    # that does to them all (tracker.analyse.paired counts a PR's rounds by it)
    run_id: str | None = None
    shared_from: str | None = None  # measured in another run (a shared baseline): that run's commit
    source: str | None = None  # not measured by a run: where it came from ("import-csv FILE")
    # A cell's replicates combined (tracker.store.cells.combine):
    compiles_ms: list[float] | None = None  # every ok replicate's median
    compiles_kept_ms: list[float] | None = None  # those the spread over compiles is read from
    replicates_failed: int | None = None
    rejected: list[str] | None = None  # the replicates no measurement could give, and why
    # Keys of the JSON this version does not know, kept as read.
    extra: dict[str, Any] = field(default_factory=dict)
    # The JSON's keys in their order (a record read back, or one that records only some fields); None: a measured
    # record's (`MEASURED`). See `to_json`.
    json_keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def replicate_number(self) -> int:
        """Which of the cell's measurements: replicate 1 records none (or null)."""
        return self.replicate or 1

    def value(self, key: str) -> Any:
        """The value a JSON key of the record holds (a field, or a key this version does not know), None if none."""
        return getattr(self, key) if key in _FIELDS else self.extra.get(key)

    def has(self, key: str) -> bool:
        """Whether its JSON (`to_json`) has the key."""
        if key in self._keys() or key in self.extra:
            return key in _FIELDS or key in self.extra
        return key in _FIELDS and getattr(self, key) != _default(_FIELDS[key])

    def to_json(self) -> dict[str, Any]:
        """The record as JSON: the keys of `json_keys` in their order (by default every measured field), then every
        other field that is set (differs from its default), then the keys of `extra`. A record read by `from_json`
        gives back the JSON it was read from; one measured by `measure_cell` every measured field, then what the
        runner and the store added."""
        out = {k: self.value(k) for k in self._keys() if k in _FIELDS or k in self.extra}
        for f in _FIELDS.values():
            if f.name not in out and getattr(self, f.name) != _default(f):
                out[f.name] = getattr(self, f.name)
        out.update((k, v) for k, v in self.extra.items() if k not in out)
        return out

    def _keys(self) -> tuple[str, ...]:
        return MEASURED if self.json_keys is None else self.json_keys

    @classmethod
    def from_json(cls, data: Any) -> CellResult:
        """A record as the cell store's JSON holds it, values as they are (tracker.store.cells.problem says whether
        a measurement could give them). A key it lacks reads as its field's default (a name or status as ""). Not
        an object: ValueError."""
        if not isinstance(data, dict):
            raise ValueError(f"a {type(data).__name__}, not a measurement")
        known = {k: v for k, v in data.items() if k in _FIELDS}
        required = {f.name: "" for f in _FIELDS.values() if _required(f) and f.name not in known}
        return cls(**required, **known, extra={k: v for k, v in data.items() if k not in _FIELDS},
                   json_keys=tuple(data))


def _required(f: Field[Any]) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


def _default(f: Field[Any]) -> Any:
    """A field's default; "" for the names and status a record must have (what `from_json` reads when absent)."""
    if f.default is not MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not MISSING else ""


_FIELDS: dict[str, Field[Any]] = {f.name: f for f in fields(CellResult) if f.name not in ("extra", "json_keys")}
# The fields `measure_cell` measures: a measured record's JSON has every one of them, in this order.
MEASURED: tuple[str, ...] = tuple(_FIELDS)[:tuple(_FIELDS).index("wall_s") + 1]
