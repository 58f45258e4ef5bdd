"""`compile-baselines merge`: combine the results of shards (GPUs of one host, or runners of a matrix) into
one asv results set per (machine, commit, environment), through asv's own Results class.

Shards of one run measure disjoint cells of the same (machine, commit, versions); a cell that a shard
did not run is NaN in its file and is taken from the shard that ran it. Files of different versions or
GPUs under one machine name are refused: results must never silently mix.
"""

from __future__ import annotations

import json
import math
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

from tracker.errors import ToolError
from tracker.store import asvfiles


class MergeError(ToolError):
    pass


def _result_files(results_dir: Path) -> list[Path]:
    if not results_dir.is_dir():
        raise MergeError(f"{results_dir} is not a results directory")
    return sorted(p for p in results_dir.glob("*/*.json") if p.name != "machine.json")


def _load(path: Path) -> Any:
    from asv.results import Results

    try:
        return Results.load(str(path))
    except Exception as e:
        raise MergeError(f"{path} is not a readable asv result file ({e}); nothing was merged") from None


def _ran(value: Any) -> bool:
    """A measured (or failed) cell; NaN marks a cell this file did not run (or skipped)."""
    return not (isinstance(value, float) and math.isnan(value))


def _check_same_run(a: Any, b: Any, path: Path) -> None:
    for key in (*asvfiles.VERSION_KEYS, "machine"):
        if str(a.params.get(key)) != str(b.params.get(key)):
            raise MergeError(f"{path}: {key} {b.params.get(key)} differs from {a.params.get(key)} in another shard; "
                             "refusing to merge results of different machines or versions")


def _absorb(into: Any, other: Any) -> None:
    """Copy into `into` every cell that `other` ran, through Results.add_result."""
    from asv.runner import BenchmarkResult

    for name in other.get_all_result_keys():
        params = other._benchmark_params.get(name) or []
        version = other._benchmark_version.get(name)
        if name in into._benchmark_version and into._benchmark_version[name] != version:
            raise MergeError(f"benchmark {name} has version {version} in one shard and "
                             f"{into._benchmark_version[name]} in another; re-run one of them")
        values = other.get_result_value(name, params)
        samples = other.get_result_samples(name, params)
        stats = other.get_result_stats(name, params)
        if not params:
            values, samples, stats = [values], [samples], [stats]
        selected = {i for i, v in enumerate(values) if _ran(v)}
        if not selected:
            continue
        number = [(s or {}).get("number") if isinstance(s, dict) else None for s in stats]
        result = [True if samples[i] is not None else values[i] for i in range(len(values))]
        bench = {"name": name, "version": version, "params": params}
        into.add_result(bench, BenchmarkResult(result=result, samples=list(samples), number=number, errcode=0,
                                               stderr="", profile=None),
                        selected_idx=selected if params else None, record_samples=True)


def merge_results(sources: list[Path], dest: Path) -> list[Path]:
    """Merge the result files of `sources` (and what `dest` already holds) into `dest`; the files written."""
    groups: dict[str, list[Path]] = defaultdict(list)
    for src in sources:
        for path in _result_files(src):
            groups[f"{path.parent.name}/{path.name}"].append(path)
    if not groups:
        raise MergeError(f"no asv result files in {', '.join(map(str, sources))}")
    written = []
    for rel, paths in sorted(groups.items()):
        target = dest / rel
        if target.exists():
            paths = [target, *paths]
        merged = _load(paths[0])
        for path in paths[1:]:
            other = _load(path)
            _check_same_run(merged, other, path)
            _absorb(merged, other)
        entry = json.loads((paths[-1].parent / "machine.json").read_text())
        entry.pop("version", None)
        conf = type("Conf", (), {"results_dir": str(dest)})()
        written.append(asvfiles.save_results(conf, merged, entry))
    for src in sources:  # asv publish needs the suite's description; any shard's copy serves
        bench = src / "benchmarks.json"
        if bench.exists() and not (dest / "benchmarks.json").exists():
            shutil.copy2(bench, dest / "benchmarks.json")
    return written
