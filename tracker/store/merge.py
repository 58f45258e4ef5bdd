"""`compile-baselines merge`: combine the results of shards (GPUs of one host, or runners of a matrix) into
one asv results set per (machine, commit, environment), through asv's own Results class.

Shards of one run measure disjoint cells of the same (machine, commit, versions); a cell that a shard
did not run is NaN in its file and is taken from the shard that ran it. Where two shards (or a shard and the
destination) both ran a cell, a measurement wins over a failure whatever the order, and among measurements the
later source's. Files of different versions or GPUs under one machine name, and a machine.json that disagrees
with its result files, are refused: results must never silently mix. Everything is read and checked before
anything is written, and the writes hold the destination's lock (asvfiles.results_lock), so a concurrent run or
merge into it loses nothing. The cell store records of the shards (failure reasons) come along.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.errors import ToolError, UsageError
from tracker.measure.cellresult import OK, CellResult
from tracker.store import asvfiles, atomic, confined
from tracker.store.cells import (
    CellStore,
    NameRefused,
    RunKey,
    check_commit,
    check_machine_name,
    default_cells_dir,
    names_its_cell,
    problem,
)


class MergeError(ToolError):
    pass


class MergeRefused(UsageError):
    """A merge the command line asks for that makes no sense (a directory into itself): exit 2, nothing written."""


def _result_files(results_dir: Path) -> list[Path]:
    if not results_dir.is_dir():
        raise MergeError(f"{results_dir} is not a results directory; nothing was merged")
    return [p for p in confined.files(results_dir, "*/*.json")  # a link or a FIFO there: a warning, left out
            if p.name != "machine.json" and not p.parent.name.startswith(".")]


def _load(path: Path) -> Any:
    from asv.results import Results

    try:
        return Results.load(str(path))
    except Exception as e:
        raise MergeError(f"{path} is not a readable asv result file ({e}); nothing was merged") from None


def _ran(value: Any) -> bool:
    """A measured (or failed) cell; NaN marks a cell this file did not run (or skipped)."""
    return not (isinstance(value, float) and math.isnan(value))


def _ok(value: Any) -> bool:
    return value is not None and _ran(value)


def _check_same_run(a: Any, b: Any, path: Path) -> None:
    for key in (*asvfiles.VERSION_KEYS, "machine"):
        if str(a.params.get(key)) != str(b.params.get(key)):
            raise MergeError(f"{path}: {key} {b.params.get(key)} differs from {a.params.get(key)} in another shard; "
                             "refusing to merge results of different machines or versions; nothing was merged")


def _machine_entry(path: Path, results: Any) -> dict[str, str]:
    """The machine.json beside the result file at `path`, checked against the file's version keys; without one,
    the machine fields the result file carries."""
    machine_file = path.parent / "machine.json"
    if not machine_file.exists() and not machine_file.is_symlink():
        return {k: str(v) for k, v in results.params.items() if k != "python"}
    try:
        entry = confined.read_json(path.parent, machine_file)
    except (OSError, ValueError) as e:
        raise MergeError(f"{machine_file} is not readable JSON ({e}); nothing was merged") from None
    if not isinstance(entry, dict):
        raise MergeError(f"{machine_file} is not an asv machine file; nothing was merged")
    entry.pop("version", None)
    for key in (*asvfiles.VERSION_KEYS, "machine"):
        if key in entry and str(entry[key]) != str(results.params.get(key)):
            raise MergeError(f"{machine_file} says {key} {entry[key]} but {path.name} was measured with "
                             f"{results.params.get(key)}; refusing to merge (fix or remove the machine.json); "
                             "nothing was merged")
    return {k: str(v) for k, v in entry.items()}


_Entry = tuple[Any, Any, Any]  # one parameter combination of a benchmark's row: (value, samples, statistics)


def _row(results: Any, name: str) -> dict[tuple[str, ...], _Entry]:
    """A benchmark's recorded entries by parameter combination, exactly as stored (asv writes a row of nothing but
    null as one null)."""
    params = results._benchmark_params.get(name) or []
    keys = list(itertools.product(*params)) if params else [()]

    def column(stored: Any) -> list[Any]:
        return list(stored) if isinstance(stored, list) and len(stored) == len(keys) else [None] * len(keys)

    values, samples, stats = (column(getattr(results, f"_{c}").get(name)) for c in ("results", "samples", "stats"))
    return {k: (values[i], samples[i], stats[i]) for i, k in enumerate(keys)}


def _union(a: list[list[str]], b: list[list[str]]) -> list[list[str]]:
    """The parameter grid holding both (per dimension: a's values, then b's new ones)."""
    if a == b or not a:
        return [list(d) for d in b]
    return [list(dict.fromkeys([*x, *y])) for x, y in zip(a, b, strict=True)]


def _absorb(into: Any, other: Any, only: Collection[tuple[str, ...]] | None = None) -> None:
    """Copy into `into` every cell that `other` ran (`only`: of these parameter combinations), exactly as `other`
    recorded it (value, samples, statistics: a copy, never recomputed from the thinned samples). A failure in `other`
    never replaces a measurement in `into`; absorbing a file that `into` already holds changes nothing."""
    for name in other.get_all_result_keys():
        if only is not None and not any(key in only for key in _row(other, name)):
            continue
        version = other._benchmark_version.get(name)
        if name in into._benchmark_version and into._benchmark_version[name] != version:
            raise MergeError(f"benchmark {name} has version {version} in one shard and "
                             f"{into._benchmark_version[name]} in another; re-run one of them; nothing was merged")
        theirs = _row(other, name)
        mine = _row(into, name) if name in into._results else {}
        mine_params, their_params = into._benchmark_params.get(name) or [], other._benchmark_params.get(name) or []
        if len(mine_params) != len(their_params) and name in into._results:
            raise MergeError(f"benchmark {name} has other parameters in one shard than in another; nothing was merged")
        params = _union(mine_params, their_params) if name in into._results else their_params
        merged = []
        for key in (itertools.product(*params) if params else [()]):
            kept, new = mine.get(key, (math.nan, None, None)), theirs.get(key, (math.nan, None, None))
            take = (only is None or key in only) and _ran(new[0]) and not (new[0] is None and _ok(kept[0]))
            merged.append(new if take else kept)
        _store_row(into, name, params, version, merged)
        for mine_at, theirs_at in ((into._started_at, other._started_at), (into._duration, other._duration)):
            times = [t for t in (mine_at.get(name), theirs_at.get(name)) if t is not None]
            if times:  # the later start and the longer duration: the same whatever the order
                mine_at[name] = max(times)


def _store_row(results: Any, name: str, params: list[list[str]], version: Any, entries: list[_Entry]) -> None:
    for i, column in enumerate(("results", "samples", "stats")):
        values = [e[i] for e in entries]
        getattr(results, f"_{column}")[name] = None if all(v is None for v in values) else values
    results._benchmark_params[name] = params
    results._benchmark_version[name] = version


@dataclass
class _Group:
    rel: str  # MACHINE/FILE.json
    sources: list[Path]  # the shards' copies, in the order given
    loaded: list[Any]
    entry: dict[str, str]  # the machine entry to write


def _read_sources(sources: list[Path]) -> list[_Group]:
    """Every shard file read and checked: readable, one run per group, machine.json consistent."""
    paths: dict[str, list[Path]] = defaultdict(list)
    for src in sources:
        for path in _result_files(src):
            paths[f"{path.parent.name}/{path.name}"].append(path)
    if not paths:
        raise MergeError(f"no asv result files in {', '.join(map(str, sources))}; nothing was merged")
    groups = []
    for rel, files in sorted(paths.items()):
        loaded = [_load(p) for p in files]
        entries = []
        for path, res in zip(files, loaded, strict=True):
            _check_same_run(loaded[0], res, path)
            entries.append(_machine_entry(path, res))
        try:
            check_machine_name(str(loaded[0].params.get("machine")))
            check_commit(str(loaded[0].commit_hash))
        except NameRefused as e:
            raise MergeError(f"{files[0]}: {e}; nothing was merged") from None
        groups.append(_Group(rel, files, loaded, entries[-1]))
    return groups


def _cells_to_carry(groups: list[_Group], cells_dirs: list[Path], dest_cells: Path
                    ) -> list[tuple[CellStore, CellResult]]:
    """The shards' cell store records (failure reasons, and what lets the destination resume) of the merged runs
    that the destination's store takes, with the store: a record the destination lacks, or an ok one over a failed
    one."""
    sources = [d for d in dict.fromkeys(cells_dirs) if d.resolve() != dest_cells.resolve() and d.is_dir()]
    if not sources:
        return []
    keys = {RunKey(str(r.params.get("machine")), r.commit_hash, str(r.params.get("torch")))
            for g in groups for r in g.loaded}
    taken: dict[Path, tuple[CellStore, CellResult]] = {}
    for key in sorted(keys, key=lambda k: (k.machine, k.commit, k.torch)):
        dest = CellStore(dest_cells, key)
        for root in sources:
            source = CellStore.of_run(root, key)
            for cell in source.all() if source is not None else []:
                if problem(cell.to_json()) or not names_its_cell(cell):
                    continue  # a damaged record stays behind: the destination measures its cell again
                replicate = cell.replicate_number
                if not isinstance(replicate, int) or replicate < 1:
                    continue
                path = dest.path(cell.preset, cell.workload, cell.mode, replicate)
                have = taken[path][1] if path in taken else dest.replicate(cell.preset, cell.workload, cell.mode,
                                                                            replicate)
                if have is None or (have.status != OK and cell.status == OK):
                    taken[path] = (dest, cell)
    return list(taken.values())


def merge_results(sources: list[Path], dest: Path, cells_dirs: list[Path] | None = None,
                  dest_cells: Path | None = None) -> list[Path]:
    """Merge the result files of `sources` (and what `dest` already holds) into `dest`; the files written.

    The cell store records of the merged runs are copied from `cells_dirs` (default: the store beside each
    source) to `dest_cells` (default: the store beside `dest`), where failure reasons are read from. Merging the
    same sources again gives the same files; a source that is `dest` itself is refused (MergeRefused)."""
    for src in sources:
        if src.resolve() == dest.resolve():
            raise MergeRefused(f"{src} is the destination itself: a results directory merged into itself changes "
                               "nothing; name the shards' directories; nothing was merged")
    groups = _read_sources(sources)
    asvfiles.check_writable(dest)
    dest_cells = dest_cells if dest_cells is not None else default_cells_dir(dest)
    cells = _cells_to_carry(groups, cells_dirs if cells_dirs is not None else [default_cells_dir(s) for s in sources],
                            dest_cells)
    # Every folder written into, checked before anything is: a merge never stops half-way (as rm checks first)
    targets = [dest / g.rel for g in groups] + [store.path(c.preset, c.workload, c.mode, c.replicate_number)
                                                for store, c in cells]
    blocked = atomic.unwritable([*targets, dest / "benchmarks.json"])
    if blocked is not None and (blocked.exists() or blocked.is_symlink()) and not blocked.is_dir():
        raise MergeError(f"cannot write results into {dest}: {blocked.name} there is a file where the machine's "
                         "folder goes; nothing was merged")
    if blocked is not None:
        raise MergeError(f"cannot merge into {dest}: {blocked} is not writable (permissions or a read-only file "
                         "system); nothing was merged")
    written = []
    with asvfiles.results_lock(dest):
        plans = []
        for g in groups:  # the destination's own files read and checked before anything is written
            target = dest / g.rel
            if (why := confined.problem(dest, target)) is not None:
                raise MergeError(f"cannot merge into {target}: {why}; nothing was merged")
            merged = _load(target) if target.exists() else None
            if merged is not None:
                _check_same_run(merged, g.loaded[0], g.sources[0])
            for other in g.loaded:
                if merged is None:
                    merged = other
                    continue
                _absorb(merged, other)
            plans.append((merged, g.entry))
        _write(plans, dest, _benchmarks_json(sources), written)
    try:
        for store, cell in cells:
            store.put(cell)
    except OSError as e:  # a full disk: no check beforehand can tell
        raise MergeError(f"cannot write into the cell store {dest_cells}: {e.strerror or e}; the result files were "
                         "merged, their cells partly: merge again to finish") from None
    return written


def _write(plans: list[tuple[Any, dict[str, str]]], dest: Path, bench: str | None, written: list[Path]) -> None:
    """Save each merged run into `dest` (appending to `written`), and the suite's description when `dest` has none.
    A write that fails (a full disk) names what was merged before it, complete, and how to finish."""
    conf = type("Conf", (), {"results_dir": str(dest)})()
    try:
        for merged, entry in plans:
            written.append(asvfiles.save_results(conf, merged, entry))
        if bench is not None and not (dest / "benchmarks.json").exists():
            try:  # asv publish needs the suite's description; any shard's copy serves
                atomic.write_text(dest / "benchmarks.json", bench)
            except OSError as e:
                raise MergeError(f"cannot write {dest / 'benchmarks.json'}: {e.strerror or e}") from None
    except (asvfiles.AsvError, MergeError) as e:
        done = f"merged before it, complete: {', '.join(map(str, written))}" if written else "nothing was merged"
        raise MergeError(f"{e}; {done}; merge again to finish (merging the same input twice gives the same "
                         "result)") from None


def copy_entries(source: Path, target: Path, dest: Path, cells: Collection[tuple[str, str, str]]) -> Path:
    """Copy into the result file `target` (of the results directory `dest`, where it exists) the entries of `cells`
    (preset, workload, mode) that the result file `source` recorded, exactly as recorded: one measurement recorded
    for two runs (tracker.store.shared). Refused, with nothing written, when the two files are of other machines or
    versions, or their benchmarks of other versions."""
    wanted = {asvfiles.param_key(*cell) for cell in cells}
    asvfiles.check_writable(dest)
    with asvfiles.results_lock(dest):
        if (why := confined.problem(dest, target)) is not None:
            raise MergeError(f"cannot record into {target}: {why}; nothing was copied")
        into, other = _load(target), _load(source)
        _check_same_run(into, other, source)
        _absorb(into, other, wanted)
        conf = type("Conf", (), {"results_dir": str(dest)})()
        return asvfiles.save_results(conf, into, _machine_entry(target, into))


def _benchmarks_json(sources: list[Path]) -> str | None:
    for src in sources:
        try:
            text = confined.read_text(src, src / "benchmarks.json")
            json.loads(text)
        except (OSError, ValueError, RecursionError):
            continue
        return text
    return None


__all__ = ["MergeError", "MergeRefused", "copy_entries", "merge_results"]
