"""asv result files -> one tidy pandas table: a row per (run, preset, workload, mode) cell.

Kernels under test (benchmarks/candidates.py) are rows too, with the mode "kernel:<name>": the `mode` column's
categories are MODES first, then the candidates' modes, so a consumer that wants the five modes only filters on
`mode.isin(MODES)` (the analysis does: a candidate never counts as a mode).

A run is one result file: (commit, machine, environment); the machine keys asv copies into every file carry
gpu, torch and triton, so a run is identified by (commit, machine, torch). Result values follow asv: a number
is a measurement, NaN is "not run / n/a" (skipped), null is a failure. asv does not save a benchmark's log
(Results.save drops stderr), so failure reasons come from the cell store beside the results when it is there.

Files are read by tracker.store.asvjson, which skips the samples (most of a file's bytes) unless asked for:
`with_samples`, or `load_samples` for the one run a comparison needs.
"""

from __future__ import annotations

import ast
import functools
import math
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tracker import metrics
from tracker.errors import ToolError, UsageError
from tracker.measure.cellresult import CellResult
from tracker.stats import LATENCY_MS
from tracker.store import confined
from tracker.store.asvfiles import CANDIDATE_CLASSES, HOST_BENCHMARK, MODE_CLASSES
from tracker.store.asvjson import RunFile, read_header, read_result_file, run_of
from tracker.store.cells import CellStore, RunKey, default_cells_dir, is_latency
from workloads import catalog
from workloads.kernels.registry import mode_of, split_key
from workloads.names import MODES

STATUSES = ("ok", "failed", "skipped")
RUN_KEYS = ["commit", "machine", "torch"]
CELL_KEYS = ["preset", "workload", "mode"]
# The sampled metric's statistics (tracker.metrics), from asv's stats of its row
_STATS = {"ci_low": "ci_99_a", "ci_high": "ci_99_b", "q25": "q_25", "q75": "q_75", "n_samples": "repeat"}


def table_columns() -> list[str]:
    """The table's columns: the run and the cell, then the sampled metric's median, statistics and samples, then
    one column per other metric of tracker.metrics, then the run's launch floor."""
    return ["commit", "date", "machine", "gpu", "torch", "triton", "preset", "workload", "mode", "domain", "status",
            "reason", metrics.sampled().column, *_STATS, "samples", *(m.column for m in metrics.unsampled()),
            "launch_us"]


NO_REASON = "failed (reason not recorded: asv result files keep no logs and the cell store has no entry)"
NOT_RUN = "not run or not applicable"


class ResultsError(ToolError):
    pass


class NoSuchRun(ResultsError, UsageError):
    """The machine or commit asked for has no run (what was asked is wrong: exit 2); says what there is."""


@dataclass
class Loaded:
    table: pd.DataFrame
    warnings: list[str] = field(default_factory=list)


class _Problems:
    """Problems with individual files: collected as one warning each, or raised at once in strict mode."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.messages: list[str] = []

    def add(self, message: str) -> None:
        if self.strict:
            raise ResultsError(message)
        self.messages.append(message)


# ---------------------------------------------------------------------------------------------------- runs


def result_files(results_dir: str | os.PathLike[str], warn: Callable[[str], object] = confined.warn_stderr
                 ) -> list[Path]:
    """The result files under `results_dir` (one folder per machine), sorted; ResultsError when there is none. A
    link or special file in their place is left out, with one warning line (`warn`) each (tracker.store.confined)."""
    root = Path(results_dir)
    if not root.is_dir():
        raise ResultsError(f"results directory {root} does not exist: run `compile-baselines run` or pass "
                           "--results-dir")
    skipped: list[str] = []
    files = [p for p in confined.files(root, "*/*.json", lambda line: (skipped.append(line), warn(line)))
             if p.name not in ("machine.json", "benchmarks.json") and not p.parent.name.startswith(".")]
    if not files:
        raise ResultsError(f"no asv result files in {root}" + (f" ({skipped[0]})" if skipped else ": run "
                           "`compile-baselines run` first, or check --results-dir"))
    return files


def list_runs(results_dir: str | os.PathLike[str], strict: bool = False) -> tuple[list[RunFile], list[str]]:
    """Every run in `results_dir`, oldest first, and one warning per file that could not be read."""
    problems = _Problems(strict)
    runs = []
    files = result_files(results_dir, problems.add)
    for path in files:
        try:
            runs.append(read_header(path))
        except (ValueError, OSError, RecursionError) as e:
            problems.add(f"skipped {path}: {_reason(e)}")
    if not runs:
        more = f" (and {len(files) - 1} more like it)" if len(files) > 1 else ""
        raise ResultsError(f"none of the {len(files)} result file(s) in {results_dir} could be read: "
                           f"{problems.messages[0]}{more}")
    runs.sort(key=lambda r: (r.date_ms, r.machine, r.commit, r.torch))
    return runs, problems.messages


def select_runs(runs: list[RunFile], machine: str | None = None, commit: str | None = None,
                unreadable: Sequence[str] = ()) -> list[RunFile]:
    """Runs of `machine` whose commit starts with `commit`; NoSuchRun naming what exists when none match (a
    ResultsError with the first of the `unreadable` files' warnings, list_runs's, where there are some: the run asked
    for may be in one of them)."""
    maybe = (f"; {len(unreadable)} result file(s) could not be read, e.g. {unreadable[0]}" if unreadable else "")
    missing = ResultsError if unreadable else NoSuchRun  # it may be in a file the tool could not read: not a mistake
    chosen = runs
    if machine is not None:
        chosen = [r for r in chosen if r.machine == machine]
        if not chosen:
            known = sorted({r.machine for r in runs})
            raise missing(f"no results for machine {machine!r}; machines with results: {', '.join(known)}"
                               + maybe)
    if commit is not None:
        by_prefix = [r for r in chosen if r.commit.lower().startswith(commit.lower())]
        if not by_prefix:
            recent = list(dict.fromkeys(r.commit[:8] for r in reversed(chosen)))[:5]
            raise missing(f"no results for commit {commit!r}" + (f" on machine {machine!r}" if machine else "")
                               + f"; latest commits with results: {', '.join(recent)}" + maybe)
        if len({r.commit for r in by_prefix}) > 1:
            matches = ", ".join(sorted({r.commit for r in by_prefix}))
            raise NoSuchRun(f"commit prefix {commit!r} is ambiguous: {matches}")
        chosen = by_prefix
    return chosen


# ---------------------------------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Names:
    """The preset and workload names cells are decoded into (the study's, then the installed plugins'): a name of
    a file that is not here is no longer in the suite."""

    presets: tuple[str, ...]
    workloads: tuple[str, ...]

    @classmethod
    def installed(cls) -> Names:
        return cls(catalog.preset_names(), catalog.workload_names())

    def exist(self, preset: np.ndarray, workload: np.ndarray) -> np.ndarray:
        """Whether each (preset, workload) code pair is an instance of the suite as installed (catalog.applies):
        False for what cannot exist (decode of a decode-invariant workload, a preset a plugin workload does not
        declare) and for unknown names (-1)."""
        table = np.array([[catalog.applies(p, w) for w in self.workloads] for p in self.presets], dtype=bool)
        known = (preset >= 0) & (workload >= 0)
        out = np.zeros(len(preset), dtype=bool)
        out[known] = table[preset[known], workload[known]] if table.size else False
        return out


@dataclass(frozen=True)
class _Grid:
    """A benchmark's decoded parameter grid in asv's order: codes into Names' presets, workloads and `modes`
    (-1: unknown); consecutive runs of `group` cells are one instance ((preset, workload): its modes)."""

    preset: np.ndarray
    workload: np.ndarray
    mode: np.ndarray
    modes: tuple[str, ...]
    group: int
    unknown: tuple[str, ...]
    exists: np.ndarray  # whether each point's (preset, workload) is an instance of the suite (Names.exist)


Params = tuple[tuple[str, ...], ...]  # asv's "params" of a benchmark, hashable: each grid is decoded once


def _params(row: list[Any], columns: dict[str, int]) -> Params:
    return tuple(tuple(p) for p in _column(row, columns, "params"))


@functools.cache
def _grid(key: Params, names: Names) -> _Grid:
    if len(key) != 3:
        raise ValueError(f"expected (preset, workload, mode) parameters, found {len(key)} parameter lists")
    unknown: list[str] = []
    codes = []
    for kind, values, known in zip(("preset", "workload", "mode"), key, (names.presets, names.workloads, MODES),
                                   strict=True):
        decoded = [ast.literal_eval(v) for v in values]  # asv stores repr()s: "'prefill'"
        unknown += [f"{kind} {v!r}" for v in decoded if v not in known]
        codes.append(np.array([known.index(v) if v in known else -1 for v in decoded], dtype=np.int16))
    p, w, m = np.meshgrid(*codes, indexing="ij")  # asv orders combinations as itertools.product
    p, w = p.ravel(), w.ravel()
    return _Grid(p, w, m.ravel(), MODES, len(codes[2]), tuple(unknown), names.exist(p, w))


@functools.cache
def _candidate_grid(key: Params, names: Names) -> _Grid:
    """The grid of candidates.Candidate: (preset, "workload:name") pairs; a candidate's mode is "kernel:<name>"."""
    if len(key) != 2:
        raise ValueError(f"expected (preset, candidate) parameters, found {len(key)} parameter lists")
    presets = [ast.literal_eval(v) for v in key[0]]
    unknown = [f"preset {p!r}" for p in presets if p not in names.presets]
    pairs: list[tuple[str, str] | None] = []
    for value in (ast.literal_eval(v) for v in key[1]):
        try:
            workload, name = split_key(value)
        except KeyError:
            workload = name = ""
        # A candidate of a workload no longer in the suite is dropped; an unregistered name is history: kept.
        pairs.append((workload, mode_of(name)) if workload in names.workloads else None)
        if pairs[-1] is None:
            unknown.append(f"candidate {value!r}")
    modes = tuple(sorted({pair[1] for pair in pairs if pair}))
    p_codes = np.array([names.presets.index(p) if p in names.presets else -1 for p in presets], dtype=np.int16)
    w_codes = np.array([names.workloads.index(x[0]) if x else -1 for x in pairs], dtype=np.int16)
    m_codes = np.array([modes.index(x[1]) if x else -1 for x in pairs], dtype=np.int16)
    p, w = np.meshgrid(p_codes, w_codes, indexing="ij")
    m = np.broadcast_to(m_codes, p.shape)
    p, w = p.ravel(), w.ravel()
    return _Grid(p, w, m.ravel(), modes, 1, tuple(unknown), names.exist(p, w))


def _column(row: list[Any], columns: dict[str, int], name: str) -> Any:
    i = columns.get(name)
    return row[i] if i is not None and i < len(row) else None


_NUMBER_TYPES = frozenset({int, float, type(None)})


def _floats(values: Any, n: int) -> np.ndarray:
    if not isinstance(values, list):
        return np.full(n, np.nan)
    if len(values) != n:
        raise ValueError(f"{len(values)} values for {n} parameter combinations")
    if not all(type(v) in _NUMBER_TYPES for v in values):  # asv writes numbers, null and NaN only
        bad = next(v for v in values if type(v) not in _NUMBER_TYPES)
        raise ValueError(f"result value {bad!r} is not a number")
    return np.array(values, dtype=float)  # None -> NaN


# No value of ours reaches this in its unit (a compile of 30,000 years, a million GiB); one above it is no
# measurement, and keeping such values out keeps every product and ratio of two values a finite float.
ABSURD = 1e12


def _impossible(values: np.ndarray, lower: float = 0.0, upper: float = ABSURD) -> np.ndarray:
    """Where a value is a number no measurement gives: infinite, or outside [`lower`, `upper`] (a latency: outside
    tracker.stats.LATENCY_MS). NaN is asv's n/a."""
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(values) & (values >= lower) & (values <= upper)
    return ~ok & ~np.isnan(values)


@dataclass
class _Chunk:
    """The rows one benchmark class of one file contributes, as arrays (codes into Names' presets and workloads
    and `modes`)."""

    file: int
    preset: np.ndarray
    workload: np.ndarray
    mode: np.ndarray
    modes: tuple[str, ...]
    arrays: dict[str, np.ndarray]
    samples: list[Any] | None
    unknown: tuple[str, ...]


IMPOSSIBLE = "_impossible"  # the table's temporary column: an impossible latency read from the file, else NaN


def _label(grid: _Grid, names: Names, i: int) -> str:
    """The grid point `i` as "preset/workload/mode" ("?" for a name no longer in the suite)."""
    codes = ((names.presets, grid.preset[i]), (names.workloads, grid.workload[i]), (grid.modes, grid.mode[i]))
    return "/".join(str(known[c]) if c >= 0 else "?" for known, c in codes)


def _metric_arrays(results: dict[str, Any], columns: dict[str, int], benchmark_class: str,
                   n: int, notes: list[str], label: Callable[[int], str]) -> dict[str, np.ndarray]:
    """A benchmark class's cells: median, statistics and status (0 ok, 1 failed, 2 skipped) from its sampled
    metric's row, one array per other metric from that metric's row. A latency no measurement gives (zero,
    negative, infinite) makes its cell failed, kept in IMPOSSIBLE for the reason; an impossible statistic or other
    metric is read as n/a; each kind gets a line in `notes`, naming a cell (`label`: grid point -> its name)."""
    names = metrics.benchmark_names(benchmark_class)
    sampled = metrics.sampled()
    row = results[names[sampled.name]]
    result = _column(row, columns, "result")
    result = result if isinstance(result, list) else [result] * n  # asv compresses all-null to null
    failed = np.fromiter((v is None for v in result), dtype=bool, count=len(result))
    median = _floats(result, n)
    bad = _impossible(median, *LATENCY_MS)
    arrays = {sampled.column: np.where(bad, np.nan, median), IMPOSSIBLE: np.where(bad, median, np.nan)}
    arrays.update({out: _floats(_column(row, columns, f"stats_{key}"), n) for out, key in _STATS.items()})
    arrays["status"] = np.where(failed | bad, 1, np.where(np.isnan(median), 2, 0)).astype(np.int8)
    for metric in metrics.unsampled():
        other = results.get(names[metric.name])
        same_grid = other is not None and _column(other, columns, "params") == _column(row, columns, "params")
        values = _column(other, columns, "result") if same_grid else None
        arrays[metric.column] = _floats(values, n) if isinstance(values, list) else np.full(n, np.nan)
    units = {**{k: sampled.unit for k in _STATS if k != "n_samples"}, "n_samples": "unit",
             **{m.column: m.unit for m in metrics.unsampled()}}
    for column, unit in units.items():
        upper = LATENCY_MS[1] if unit == "ms" else ABSURD
        wrong = _impossible(arrays[column], upper=upper) | (bad & ~np.isnan(arrays[column]))
        if wrong.any():
            if not bad[wrong].all():  # an impossible latency's cell has said so already
                first = int(np.flatnonzero(wrong & ~bad)[0])
                notes.append(f"{int((wrong & ~bad).sum())} {column} value(s) negative, infinite or absurd (e.g. "
                             f"{label(first)} = {float(arrays[column][first])!r}), read as n/a")
            arrays[column] = np.where(wrong, np.nan, arrays[column])
    return arrays


def _good_samples(x: Any) -> bool:
    return isinstance(x, list) and all(map(is_latency, x))


def _chunk(row: list[Any], columns: dict[str, int], grid: _Grid, arrays: dict[str, np.ndarray], present: np.ndarray,
           file_index: int, with_samples: bool, notes: list[str], label: Callable[[int], str]) -> _Chunk:
    keep = np.flatnonzero(present & (grid.preset >= 0) & (grid.workload >= 0) & (grid.mode >= 0))
    samples = None
    if with_samples:
        stored = _column(row, columns, "samples") or [None] * len(grid.preset)
        if not isinstance(stored, list) or len(stored) != len(grid.preset):
            raise ValueError("the samples column does not match the parameter combinations")
        samples = [stored[i] if arrays["status"][i] == 0 else None for i in keep]
        wrong = [j for j, x in enumerate(samples) if x is not None and not _good_samples(x)]
        for j in wrong:
            samples[j] = None
        if wrong:
            notes.append(f"{len(wrong)} cell(s) with samples that are not positive finite numbers (e.g. "
                         f"{label(int(keep[wrong[0]]))}): samples ignored")
    return _Chunk(file_index, grid.preset[keep], grid.workload[keep], grid.mode[keep], grid.modes,
                  {k: v[keep] for k, v in arrays.items()}, samples, grid.unknown)


def _file_rows(data: dict[str, Any], file_index: int, with_samples: bool, notes: list[str], names: Names
               ) -> list[_Chunk]:
    """The file's cells: the compile modes' (the study's, then the plugins'), then the kernels under test's; what
    was read as n/a or failed for being impossible goes to `notes`. A grid point that cannot exist (Names.exist)
    is left out unless it holds a measurement: asv fills the points a grown grid adds with null, its mark of a
    failure, and such a point was never run."""
    columns = {c: i for i, c in enumerate(data["result_columns"])}
    results = data["results"]
    sampled = metrics.sampled().name
    mode_chunks: dict[str, _Chunk] = {}
    taken: set[tuple[int, int]] = set()  # instances already read from a plugin class
    impossible: list[str] = []
    for benchmark_class in reversed(MODE_CLASSES):  # the plugins' first: they supersede a study grid that had them
        row = results.get(metrics.benchmark_names(benchmark_class)[sampled])
        if row is None:
            continue
        grid = _grid(_params(row, columns), names)
        label = functools.partial(_label, grid, names)
        arrays = _metric_arrays(results, columns, benchmark_class, len(grid.preset), notes, label)
        impossible += _impossible_cells(arrays, label)
        real = grid.exists | (arrays["status"] == 0)
        # Keep every mode of an instance that has any result; an instance with none was not run here.
        has_result = (arrays["status"] != 2) & real
        present = has_result.reshape(-1, grid.group).any(axis=1).repeat(grid.group) & real
        present &= np.fromiter(((p, w) not in taken for p, w in zip(grid.preset.tolist(), grid.workload.tolist(),
                                                                     strict=True)), dtype=bool, count=len(present))
        chunk = _chunk(row, columns, grid, arrays, present, file_index, with_samples, notes, label)
        taken |= set(zip(chunk.preset.tolist(), chunk.workload.tolist(), strict=True))
        mode_chunks[benchmark_class] = chunk
    chunks = [mode_chunks[c] for c in MODE_CLASSES if c in mode_chunks]
    for benchmark_class in CANDIDATE_CLASSES:
        row = results.get(metrics.benchmark_names(benchmark_class)[sampled])
        if row is None:
            continue
        grid = _candidate_grid(_params(row, columns), names)
        label = functools.partial(_label, grid, names)
        arrays = _metric_arrays(results, columns, benchmark_class, len(grid.preset), notes, label)
        impossible += _impossible_cells(arrays, label)
        # A measured candidate is always kept. A failed or skipped one only where its instance's modes were run:
        # "runs on cuda only" is worth showing there, and asv fills the combinations a new candidate adds to an
        # existing file's grid with failures (null) in the presets this run did not select.
        run_here = np.fromiter(((p, w) in taken for p, w in zip(grid.preset.tolist(), grid.workload.tolist(),
                                                                strict=True)), dtype=bool, count=len(grid.preset))
        present = (arrays["status"] == 0) | (run_here & grid.exists)
        chunks.append(_chunk(row, columns, grid, arrays, present, file_index, with_samples, notes, label))
    if impossible:
        notes.insert(0, f"{len(impossible)} cell(s) with an impossible latency (e.g. {impossible[0]}), counted as "
                        "failed")
    return chunks


def _launch_us(data: dict[str, Any], notes: list[str]) -> float:
    """The run's launch floor (us), NaN when not recorded; one recorded that no launch takes is said in `notes`."""
    row = data["results"].get(HOST_BENCHMARK)
    if not row:
        return float("nan")
    columns = {c: i for i, c in enumerate(data["result_columns"])}
    value = _column(row, columns, "result")
    value = value[0] if isinstance(value, list) and value else value
    usable = type(value) in (int, float) and 0 < value <= LATENCY_MS[1] * 1000  # us
    if not usable and value is not None and not (isinstance(value, float) and math.isnan(value)):
        notes.append(f"launch floor {value!r} us ({HOST_BENCHMARK}) is not a time a launch takes, read as not "
                     "recorded")
    return float(value) if usable else float("nan")


def _check_benchmarks(data: dict[str, Any], path: Path, stale: dict[str, list[Path]], problems: _Problems) -> None:
    ours = {*(name for c in (*MODE_CLASSES, *CANDIDATE_CLASSES) for name in metrics.benchmark_names(c).values()),
            HOST_BENCHMARK}
    for name in data["results"]:
        if name not in ours:
            if problems.strict:
                problems.add(f"{path}: benchmark {name} is no longer in the suite")
            stale[name].append(path)


def _stored_cells(table: pd.DataFrame, rows: np.ndarray, cells_dir: Path | None) -> list[CellResult | None]:
    """The cell store's record of each of `rows` (positions in `table`), or None where it has none."""
    # Python strings, not numpy's fixed width: one machine name of a megabyte would cost megabytes a row
    cols = {c: [str(v) for v in table[c].to_numpy()[rows]] for c in [*RUN_KEYS, *CELL_KEYS]}
    stores: dict[tuple[str, str, str], CellStore | None] = {}
    out: list[CellResult | None] = []
    for j in range(len(rows)):
        key = (cols["machine"][j], cols["commit"][j], cols["torch"][j])
        if key not in stores:  # one directory check per run: most runs have no store here
            stores[key] = CellStore.of_run(cells_dir, RunKey(*key)) if cells_dir is not None else None
        store = stores[key]
        out.append(store.get(cols["preset"][j], cols["workload"][j], cols["mode"][j]) if store else None)
    return out


def _reasons(table: pd.DataFrame, cells_dir: Path | None) -> pd.Series:
    """Why failed and skipped cells did not measure: the cell store's record when it has one."""
    reason = np.full(len(table), "", dtype=object)
    todo = np.flatnonzero((table["status"] != "ok").to_numpy())
    status = table["status"].to_numpy()[todo].astype(str)
    for j, (i, cell) in enumerate(zip(todo, _stored_cells(table, todo, cells_dir), strict=True)):
        text = str(cell.reason or "") if cell else ""
        reason[i] = text or (NO_REASON if status[j] == "failed" else NOT_RUN)
    return pd.Series(reason, index=table.index, dtype=object)


def fingerprints(table: pd.DataFrame, cells_dir: str | os.PathLike[str] | None) -> pd.Series:
    """What each ok cell of `table` compiled (tracker.measure.fingerprint), from the cell store: a dict, or None
    where the store has no record or the record no fingerprint (eager, kernels under test, older runs)."""
    out = np.full(len(table), None, dtype=object)
    todo = np.flatnonzero((table["status"] == "ok").to_numpy())
    for i, cell in zip(todo, _stored_cells(table, todo, Path(cells_dir) if cells_dir else None), strict=True):
        fp = cell.fingerprint if cell else None
        out[i] = fp if isinstance(fp, dict) and isinstance(fp.get("code"), str) else None
    return pd.Series(out, index=table.index, dtype=object)


def _stored_values(table: pd.DataFrame, cells_dir: str | os.PathLike[str] | None,
                   key: str) -> Iterator[tuple[int, Any]]:
    """(row position, what its record in the cell store holds under `key`, or None) for each ok cell of `table`."""
    todo = np.flatnonzero((table["status"] == "ok").to_numpy())
    for i, cell in zip(todo, _stored_cells(table, todo, Path(cells_dir) if cells_dir else None), strict=True):
        yield i, (cell.value(key) if cell else None)


def stored_numbers(table: pd.DataFrame, cells_dir: str | os.PathLike[str] | None, key: str) -> pd.Series:
    """A number each ok cell of `table` recorded in the cell store (e.g. `flush_mib`, `host_us`): NaN where the store
    has no record or the record no such number (an imported study, runs before the grown flush)."""
    out = np.full(len(table), np.nan)
    for i, value in _stored_values(table, cells_dir, key):
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[i] = float(value)
    return pd.Series(out, index=table.index, dtype=float)


def stored_texts(table: pd.DataFrame, cells_dir: str | os.PathLike[str] | None, key: str) -> pd.Series:
    """A text each ok cell of `table` recorded in the cell store (e.g. `gpu_index`, the GPU that measured it): None
    where the store has no record or the record no such text (runs before `run --gpus`)."""
    out = np.full(len(table), None, dtype=object)
    for i, value in _stored_values(table, cells_dir, key):
        out[i] = value if isinstance(value, str) else None
    return pd.Series(out, index=table.index, dtype=object)


def load_runs(runs: Iterable[RunFile], *, strict: bool = False, with_samples: bool = False,
              cells_dir: str | os.PathLike[str] | None = None) -> Loaded:
    """The table of the given runs' cells (see `table_columns`), and one warning per skipped file or stale benchmark."""
    problems = _Problems(strict)
    chunks: list[_Chunk] = []
    files: list[RunFile] = []
    launch: list[float] = []
    stale: dict[str, list[Path]] = defaultdict(list)
    unknown: dict[str, list[Path]] = defaultdict(list)
    runs = list(runs)
    names = Names.installed()
    unreadable: list[str] = []
    for run in runs:
        try:
            data = read_result_file(run.path, with_samples)
            run = run_of(run.path, data)
            _check_benchmarks(data, run.path, stale, problems)
            notes: list[str] = []
            file_chunks = _file_rows(data, len(files), with_samples, notes, names)
            for name in (name for chunk in file_chunks for name in chunk.unknown):
                if strict:
                    problems.add(f"{run.path}: {name} is no longer in the suite")
                unknown[name].append(run.path)
        except (ValueError, OSError, TypeError, KeyError, SyntaxError, RecursionError, MemoryError) as e:
            problems.add(f"skipped {run.path}: {_reason(e)}")
            unreadable.append(problems.messages[-1])
            continue
        floor = _launch_us(data, notes)
        for note in notes:
            problems.add(f"{run.path}: {note}")
        if not file_chunks:
            continue
        files.append(run)
        launch.append(floor)
        chunks += file_chunks
    if runs and len(unreadable) == len(runs):
        more = f" (and {len(runs) - 1} more like it)" if len(runs) > 1 else ""
        raise ResultsError(f"none of the {len(runs)} result file(s) to read could be read: {unreadable[0]}{more}")
    for name, paths in sorted(stale.items()):
        problems.add(f"ignored benchmark {name} in {len(paths)} result file(s) (e.g. {paths[0]}): no longer in the "
                     "suite")
    for name, paths in sorted(unknown.items()):
        problems.add(f"ignored cells of {name} in {len(paths)} result file(s) (e.g. {paths[0]}): no longer in the "
                     "suite")
    table = _assemble(chunks, files, launch, with_samples, names)
    table = _drop_duplicate_runs(table, problems)
    table["reason"] = _reasons(table, Path(cells_dir) if cells_dir else None)
    impossible = table[IMPOSSIBLE].notna()
    table.loc[impossible, "reason"] = [f"impossible latency {float(v)!r} ms in the result file: not a measurement"
                                       for v in table.loc[impossible, IMPOSSIBLE]]
    return Loaded(table[table_columns()], problems.messages)


def _reason(e: BaseException) -> str:
    """An exception as a reason a file was skipped: what went wrong, where a KeyError alone would say only 'x'."""
    if isinstance(e, KeyError):
        return f"missing key {e.args[0]!r}" if e.args else "missing key"
    if isinstance(e, RecursionError):
        return "nested too deeply"
    return str(e) or type(e).__name__


def _impossible_cells(arrays: dict[str, np.ndarray], label: Callable[[int], str]) -> list[str]:
    """'preset/workload/mode = value ms' of every grid point of a benchmark whose latency was impossible, whether
    or not it is a cell the table keeps (a point no instance of the suite has is dropped, never silently)."""
    return [f"{label(i)} = {float(arrays[IMPOSSIBLE][i])!r} ms" for i in np.flatnonzero(~np.isnan(arrays[IMPOSSIBLE]))]


def _categorical(values: list[str], codes: np.ndarray) -> pd.Categorical:
    cats = sorted(set(values))
    lookup = np.array([cats.index(v) for v in values], dtype=np.int32) if values else np.array([], dtype=np.int32)
    return pd.Categorical.from_codes(lookup[codes] if len(codes) else codes.astype(np.int32), categories=cats)


def _mode_names(chunks: list[_Chunk]) -> list[str]:
    """The mode column's categories: MODES (their codes stay 0..4), then every candidate's "kernel:<name>"."""
    return [*MODES, *sorted({m for c in chunks for m in c.modes} - set(MODES))]


def _assemble(chunks: list[_Chunk], files: list[RunFile], launch: list[float], with_samples: bool,
              names: Names) -> pd.DataFrame:
    mode_names = _mode_names(chunks)
    if chunks:
        file_idx = np.concatenate([np.full(len(c.preset), c.file, dtype=np.int32) for c in chunks])
        preset = np.concatenate([c.preset for c in chunks])
        workload = np.concatenate([c.workload for c in chunks])
        mode = np.concatenate([np.array([mode_names.index(m) for m in c.modes], dtype=np.int32)[c.mode]
                               if len(c.mode) else c.mode.astype(np.int32) for c in chunks])
        arrays = {k: np.concatenate([c.arrays[k] for c in chunks]) for k in chunks[0].arrays}
    else:
        file_idx = np.array([], dtype=np.int32)
        preset = workload = mode = np.array([], dtype=np.int16)
        numeric = [metrics.sampled().column, IMPOSSIBLE, *_STATS, *(m.column for m in metrics.unsampled())]
        arrays = {k: np.array([], dtype=float) for k in numeric}
        arrays["status"] = np.array([], dtype=np.int8)
    all_domains = list(catalog.domains())
    domains = np.array([all_domains.index(catalog.domain(w)) for w in names.workloads], dtype=np.int8)
    table = pd.DataFrame({
        "commit": _categorical([f.commit for f in files], file_idx),
        "date": pd.to_datetime(np.array([f.date_ms for f in files], dtype=np.int64)[file_idx], unit="ms", utc=True),
        "machine": _categorical([f.machine for f in files], file_idx),
        "gpu": _categorical([f.params.get("gpu", "unknown") for f in files], file_idx),
        "torch": _categorical([f.torch for f in files], file_idx),
        "triton": _categorical([f.params.get("triton", "unknown") for f in files], file_idx),
        "preset": pd.Categorical.from_codes(preset.astype(np.int32), categories=list(names.presets)),
        "workload": pd.Categorical.from_codes(workload.astype(np.int32), categories=list(names.workloads)),
        "mode": pd.Categorical.from_codes(mode.astype(np.int32), categories=mode_names),
        "domain": pd.Categorical.from_codes(domains[workload].astype(np.int32), categories=all_domains),
        "status": pd.Categorical.from_codes(arrays.pop("status").astype(np.int32), categories=list(STATUSES)),
        **arrays,
        "launch_us": np.array(launch, dtype=float)[file_idx] if launch else np.array([], dtype=float),
    })
    table["n_samples"] = table["n_samples"].astype("Int64")
    if with_samples:
        table["samples"] = pd.Series([s for c in chunks for s in (c.samples or [])], dtype=object)
    else:
        table["samples"] = pd.Series([None] * len(table), dtype=object)
    return table



def _drop_duplicate_runs(table: pd.DataFrame, problems: _Problems) -> pd.DataFrame:
    """Two files for one (commit, machine, torch) (two environments with the same torch): keep the later file."""
    dup = table.duplicated(subset=[*RUN_KEYS, *CELL_KEYS], keep="last")
    if dup.any():
        for key in table.loc[dup, RUN_KEYS].drop_duplicates().itertuples(index=False):
            problems.add(f"run {key.commit[:8]} on {key.machine} with torch {key.torch} is in more than one result "
                         "file: the cells of the last file read are used")
        table = table.loc[~dup].reset_index(drop=True)
    return table


def load_results(results_dir: str | os.PathLike[str], *, machine: str | None = None, commit: str | None = None,
                 strict: bool = False, with_samples: bool = False,
                 cells_dir: str | os.PathLike[str] | None = None) -> Loaded:
    """Every cell of the result files in `results_dir` (optionally one machine and/or commit prefix).

    Unreadable files (truncated, corrupt, another asv format version) and benchmarks or parameters no longer in
    the suite are skipped with one warning each; `strict` raises ResultsError instead. Failure reasons are read
    from `cells_dir` (default: the cell store beside the results directory)."""
    runs, warnings = list_runs(results_dir, strict)
    runs = select_runs(runs, machine, commit, warnings)
    loaded = load_runs(runs, strict=strict, with_samples=with_samples,
                       cells_dir=cells_dir if cells_dir is not None else default_cells_dir(results_dir))
    loaded.warnings[:0] = warnings
    return loaded


def load_samples(results_dir: str | os.PathLike[str], machine: str, commit: str,
                 torch: str | None = None) -> pd.DataFrame:
    """One run's cells with their samples (what a comparison of two runs needs): the table's columns."""
    table = load_results(results_dir, machine=machine, commit=commit, with_samples=True).table
    if torch is not None:
        table = table[table["torch"] == torch]
        if table.empty:
            raise ResultsError(f"no results for torch {torch} at commit {commit} on machine {machine}")
    elif table["torch"].nunique() > 1:
        raise ResultsError(f"commit {commit} on {machine} was measured with several torch versions "
                           f"({', '.join(sorted(table['torch'].unique()))}): choose one")
    return table.reset_index(drop=True)
