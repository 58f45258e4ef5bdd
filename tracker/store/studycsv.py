"""`compile-baselines import-csv`: a results CSV in the study's format -> asv result files, one run of the history.

The study's file has one row per (workload, preset, mode, tag): every measurement appears once per tag. As the
study's analysis did, rows are de-duplicated on (shape_preset, workload, mode) and ok rows kept; a cell with no ok
row is recorded as failed, its `error` (or status) as the reason. The study's published file (docs/workloads.md)
also measures the five decode-invariant workloads in decode, with the same shapes as in prefill; the study's
figures count 18 decode instances, so those rows are left out (`workloads.names.applies`), as they are from our
own runs, and the import says how many.

What is written, and why:
- latency: the study's median, exactly, as the benchmark's value. The study kept no samples, only median, p25
  and p99; inventing samples would fake asv's CI and quartiles, and asv's tools need both quartiles when any is
  present, so no statistics are stored (the tie-aware view then uses the relative band alone).
- every other metric (compile time, peak memory): n/a (NaN), the study did not record them; failed cells are null
  in all of them.
- the launch floor: only when given (`launch_us`); without it host-bound flags are unknown for this run.
- failed cells also go to the cell store beside the results, the place failure reasons are read from (asv's
  result files keep no logs).
- the run: the machine name and versions the user gives (triton, driver, cuda "unknown" unless given), the given
  commit or the SHA-1 of the file's bytes (asv needs a hex hash; the same file always lands on the same run), and
  the given date or the file's modification time.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import importlib.util
import itertools
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tracker import metrics
from tracker.errors import ToolError, UsageError
from tracker.measure.cellresult import FAILED, CellResult
from tracker.paths import REPO_ROOT
from tracker.store import asvfiles, asvjson
from tracker.store.cells import CellStore, RunKey, check_commit, check_machine_name, default_cells_dir
from workloads.names import MODES, PRESET_NAMES, WORKLOAD_NAMES, applies

REQUIRED = ("workload", "shape_preset", "domain", "tag", "mode", "status", "elapsed_wall_s", "median_ms", "p25_ms",
            "p99_ms")
# The keys of a failed cell's record an import keeps (its reason), in the order imports have written them.
IMPORTED_KEYS = ("preset", "workload", "mode", "device", "status", "reason", "samples_ms", "wall_s", "host", "source")
STUDY_ENV = SimpleNamespace(name="existing-study-csv", python="study-csv", env_vars={})
BASELINES_PY = REPO_ROOT / "benchmarks" / "baselines.py"


class StudyCsvError(ToolError):
    pass


@dataclass(frozen=True)
class StudyCell:
    preset: str
    workload: str
    mode: str
    ok: bool
    median_ms: float | None
    p25_ms: float | None
    p99_ms: float | None
    wall_s: float
    reason: str


def _number(text: str, what: str, line: int, path: Path, positive: bool = False) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise StudyCsvError(f"{path}:{line}: {what} {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        kind = "positive" if positive else "non-negative"
        raise StudyCsvError(f"{path}:{line}: {what} {text!r} is not a finite {kind} number")
    return value


def _measured(r: dict[str, str]) -> tuple[str, ...]:
    """An ok row's measurement, as written: median, p25 and p99."""
    return tuple((r[c] or "").strip() for c in ("median_ms", "p25_ms", "p99_ms"))


def read_study_csv(path: str | os.PathLike[str]) -> list[StudyCell]:
    """The de-duplicated cells of a study-format CSV, in file order; StudyCsvError for anything malformed.
    Cells of a (preset, workload) the study does not count (decode of a decode-invariant workload) are left out."""
    return _read(path)[0]


def _read(path: str | os.PathLike[str]) -> tuple[list[StudyCell], int]:
    """The cells, and how many cells were left out as decode of a decode-invariant workload."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # a spreadsheet's byte order mark is no column
            reader = csv.DictReader(f)
            missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
            if missing:
                raise StudyCsvError(f"{path}: missing column(s) {', '.join(missing)}; the study's format has "
                                    f"{', '.join(REQUIRED)} (+ error)")
            rows = [(i + 2, r) for i, r in enumerate(reader)]  # line 1 is the header
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise StudyCsvError(f"cannot read {path}: {e}") from None
    if not rows:
        raise StudyCsvError(f"{path}: no rows")
    for column, known in (("shape_preset", PRESET_NAMES), ("workload", WORKLOAD_NAMES), ("mode", MODES)):
        unknown: dict[str, int] = {}
        for line, r in rows:
            if r[column] not in known:
                unknown.setdefault(r[column], line)
        if unknown:
            listed = ", ".join(f"{v!r} (line {n})" for v, n in unknown.items())
            raise StudyCsvError(f"{path}: unknown {column.replace('shape_', '')} {listed}; known: {', '.join(known)}")
    chosen: dict[tuple[str, str, str], tuple[int, dict[str, str]]] = {}
    for line, r in rows:
        key = (r["shape_preset"], r["workload"], r["mode"])
        # the first ok row of a cell wins; a failed row only stands when no row of the cell is ok
        if key not in chosen or (r["status"] == "ok" and chosen[key][1]["status"] != "ok"):
            chosen[key] = (line, r)
        elif r["status"] == "ok" and _measured(r) != _measured(chosen[key][1]):
            # the study repeats a measurement once per tag, identically: two different ones is not the study's file
            raise StudyCsvError(f"{path}: lines {chosen[key][0]} and {line} measure {'/'.join(key)} differently "
                                f"({_measured(chosen[key][1])} vs {_measured(r)}): remove one of them")
    cells = []
    left_out = 0
    for (preset, workload, mode), (line, r) in chosen.items():
        if not applies(preset, workload):
            left_out += 1
            continue
        ok = r["status"] == "ok"
        wall = _number(r["elapsed_wall_s"], "elapsed_wall_s", line, path) if r["elapsed_wall_s"] else 0.0
        if ok:
            median = _number(r["median_ms"], "median_ms", line, path, positive=True)
            p25 = _number(r["p25_ms"], "p25_ms", line, path) if r["p25_ms"] else None
            p99 = _number(r["p99_ms"], "p99_ms", line, path) if r["p99_ms"] else None
            cells.append(StudyCell(preset, workload, mode, True, median, p25, p99, wall, ""))
        else:
            reason = (r.get("error") or "").strip() or f"status {r['status']!r} in the study's file"
            cells.append(StudyCell(preset, workload, mode, False, None, None, None, wall, reason))
    if not cells:
        raise StudyCsvError(f"{path}: no cells the study counts (only decode rows of decode-invariant workloads)")
    return cells, left_out


def suite_benchmarks() -> dict[str, dict[str, Any]]:
    """asv's description (name, params as repr()s, version) of our benchmarks, as its discovery would give it,
    read from benchmarks/baselines.py without running asv's discovery (a subprocess importing the suite)."""
    if not BASELINES_PY.is_file():
        raise StudyCsvError(f"{BASELINES_PY} not found: import-csv runs from a source checkout of the project")
    spec = importlib.util.spec_from_file_location("_cb_baselines", BASELINES_PY)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    base = module.Baseline
    params = [[repr(v) for v in values] for values in base.params]
    out = {name: {"name": name, "params": params, "param_names": list(base.param_names), "version": str(base.version)}
           for name in metrics.benchmark_names(asvfiles.BENCHMARK_CLASS).values()}
    out[asvfiles.HOST_BENCHMARK] = {"name": asvfiles.HOST_BENCHMARK, "params": [], "param_names": [],
                                    "version": str(module.Host.version)}
    return out


def _combinations(params: list[list[str]]) -> dict[tuple[str, ...], int]:
    """asv's index of each parameter combination (params hold repr()s, combined as itertools.product)."""
    return {combo: i for i, combo in enumerate(itertools.product(*params))}


def _add(results: Any, bench: dict[str, Any], values: list[Any], selected: set[int], duration: float) -> None:
    from asv.runner import BenchmarkResult

    n = len(values)
    # number=None: asv keeps the value as given (no statistics computed from samples). No log: asv writes none
    # into result files; failure reasons go to the cell store.
    res = BenchmarkResult(result=values, samples=[None] * n, number=[None] * n, errcode=0, stderr="", profile=None)
    results.add_result(bench, res, selected_idx=selected, duration=duration, record_samples=False,
                       started_at=dt.datetime.now(dt.UTC))


def import_csv(path: str | os.PathLike[str], results_dir: str | os.PathLike[str], machine: str, torch: str,
               gpu: str | None = None, commit: str | None = None, date_ms: int | None = None, *,
               triton: str | None = None, driver: str | None = None, cuda: str | None = None,
               launch_us: float | None = None, cells_dir: str | os.PathLike[str] | None = None) -> Path:
    """Write the study CSV at `path` as one asv run in `results_dir`; returns the result file written."""
    path = Path(path)
    if date_ms is not None and (problem := asvjson.date_problem(date_ms)):
        raise UsageError(problem)
    cells = read_study_csv(path)
    if commit is None:
        commit = hashlib.sha1(path.read_bytes()).hexdigest()
    check_commit(commit)
    check_machine_name(machine)  # the same rule as `run`'s
    if date_ms is None:  # when it was written
        date_ms = int(path.stat().st_mtime * 1000)
        if problem := asvjson.date_problem(date_ms):
            raise StudyCsvError(f"{path}'s modification time as the run's {problem}: pass --date")
    host = {"gpu": gpu or "unknown", "driver": driver or "unknown", "cuda": cuda or "unknown", "torch": torch,
            "triton": triton or "unknown"}
    entry = {"machine": machine, "os": "unknown", "arch": "unknown", "cpu": "unknown", "num_cpu": "", "ram": "",
             **host}
    conf = SimpleNamespace(results_dir=str(Path(results_dir).resolve()))
    benchmarks = suite_benchmarks()
    asvfiles.check_writable(conf.results_dir)
    with asvfiles.results_lock(conf.results_dir):  # other writers of the directory add to the file, never lose it
        results = asvfiles.open_results(conf, STUDY_ENV, entry, commit, date_ms)
        written = _fill(results, benchmarks, cells, launch_us, conf, entry)

    store = CellStore(cells_dir if cells_dir is not None else default_cells_dir(results_dir),
                      RunKey(machine, commit, torch))
    for c in cells:
        if not c.ok:
            store.put(CellResult(c.preset, c.workload, c.mode, "cuda", FAILED, reason=c.reason, wall_s=c.wall_s,
                                 host=host, source=f"import-csv {path.name}", json_keys=IMPORTED_KEYS))
    return written


def _fill(results: Any, benchmarks: dict[str, dict[str, Any]], cells: list[StudyCell], launch_us: float | None,
          conf: Any, entry: dict[str, str]) -> Path:
    """Add the study's cells to `results` and save it."""
    names = metrics.benchmark_names(asvfiles.BENCHMARK_CLASS)
    bench = benchmarks[names[metrics.sampled().name]]
    index = _combinations(bench["params"])
    n = len(index)
    latency: list[Any] = [float("nan")] * n
    selected: set[int] = set()
    for c in cells:
        i = index[(repr(c.preset), repr(c.workload), repr(c.mode))]
        selected.add(i)
        latency[i] = c.median_ms if c.ok else None
    duration = sum(c.wall_s for c in cells)
    _add(results, bench, latency, selected, duration)
    not_recorded = [None if v is None else float("nan") for v in latency]  # failed stays failed; ok -> n/a
    for metric in metrics.unsampled():
        _add(results, benchmarks[names[metric.name]], not_recorded, selected, duration)
    if launch_us is not None:
        _add(results, benchmarks[asvfiles.HOST_BENCHMARK], [float(launch_us)], {0}, 0.0)
    return asvfiles.save_results(conf, results, entry)


@dataclass(frozen=True)
class Imported:
    """What became of a study CSV: its cells (failed among them), the decode cells of decode-invariant workloads left
    out, and the run it was recorded as."""

    cells: int
    failed: int
    left_out: int
    commit: str
    written: Path


def import_study(path: str | os.PathLike[str], results_dir: str | os.PathLike[str], machine: str, torch: str,
                 gpu: str | None = None, commit: str | None = None, date_ms: int | None = None, *,
                 triton: str | None = None, driver: str | None = None, cuda: str | None = None,
                 launch_us: float | None = None) -> Imported:
    """`import_csv`, and what became of the file."""
    cells, left_out = _read(path)
    written = import_csv(path, results_dir, machine, torch, gpu, commit, date_ms, triton=triton, driver=driver,
                         cuda=cuda, launch_us=launch_us)
    run = json.loads(written.read_text())
    return Imported(len(cells), sum(not c.ok for c in cells), left_out, run["commit_hash"], written)
