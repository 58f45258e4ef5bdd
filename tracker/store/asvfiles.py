"""asv's files, written through asv's own classes: the machine file (with our version keys) and results.

asv records no GPU or library versions for an `existing` environment, so the machine entry carries
gpu, driver, cuda, torch and triton; asv copies machine keys into every result file's params, which is
what makes them selectors in `asv publish` and the per-PyTorch-version axis of the tracker.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import platform
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tracker import metrics
from tracker.errors import ToolError
from tracker.store import atomic
from tracker.store.cells import CellFailed, CellSkipped, metric_value
from workloads.kernels.registry import candidate_name

BENCHMARK_CLASS = "baselines.Baseline"
HOST_BENCHMARK = "baselines.Host.track_launch_overhead"
# Kernels under test: params (preset, "workload:name"); a cell's mode is "kernel:<name>".
CANDIDATE_CLASS = "candidates.Candidate"
# asv's name of each metric's benchmark (baselines.Baseline.track_latency, ...). The writers and readers ask
# tracker.metrics.benchmark_names when they run; these are for code that wants the names as constants.
METRIC_BENCHMARKS: dict[str, str] = metrics.benchmark_names(BENCHMARK_CLASS)
CANDIDATE_METRIC_BENCHMARKS: dict[str, str] = metrics.benchmark_names(CANDIDATE_CLASS)
VERSION_KEYS = ("gpu", "driver", "cuda", "torch", "triton")


class AsvError(ToolError):
    pass


def load_conf(path: str | os.PathLike[str] = "asv.conf.json", results_dir: str | None = None) -> Any:
    """asv's config at `path`; `results_dir`, when given, in place of the config's."""
    from asv.config import Config
    from asv.util import UserError

    try:
        conf = Config.load(str(path))
    except UserError as e:
        raise AsvError(f"cannot read asv config {path}: {e}") from None
    # asv resolves the suite's folder against the working directory (its CLI runs from the config's folder);
    # the tracker may run anywhere
    conf.benchmark_dir = str(Path(path).resolve().parent / conf.benchmark_dir)
    if results_dir:
        conf.results_dir = os.path.abspath(results_dir)
    return conf


def machine_entry(machine: str, host: dict[str, str]) -> dict[str, str]:
    """asv's machine fields plus our version keys, from the live environment (`host` is a HostInfo dict)."""
    try:
        ram = str(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1024)
    except (ValueError, OSError, AttributeError):
        ram = ""
    entry = {
        "machine": machine,
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "cpu": host.get("cpu", ""),
        "num_cpu": str(os.cpu_count() or ""),
        "ram": ram,
    }
    entry.update({k: host.get(k, "unknown") for k in VERSION_KEYS})
    return entry


def write_machine_file(entry: dict[str, str], path: str | os.PathLike[str] | None = None) -> Path:
    """Add or replace this machine's entry of ~/.asv-machine.json (what `asv run --machine` reads)."""
    path = Path(path or Path.home() / ".asv-machine.json")
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = json.loads(path.read_text())
        except ValueError as e:
            raise AsvError(f"{path} is not valid JSON ({e}); fix or remove it") from None
    data["version"] = 1
    data[entry["machine"]] = entry
    atomic.write_json(path, data)
    return path


def existing_environment(conf: Any, python: str) -> Any:
    from asv import environment

    envs = list(environment.get_environments(conf, [f"existing:{python}"]))
    if not envs:
        raise AsvError(f"asv found no environment for {python}")
    return envs[0]


def discover(conf: Any, env: Any, commit: str) -> Any:
    """asv's own benchmark discovery (one process importing the suite)."""
    from asv import repo as asv_repo
    from asv.benchmarks import Benchmarks
    from asv.util import UserError

    try:
        repo = asv_repo.get_repo(conf)
    except UserError:
        repo = asv_repo.NoRepository()
    try:
        return Benchmarks.discover(conf, repo, [env], [commit])
    except UserError as e:
        raise AsvError(f"asv benchmark discovery failed: {e}") from None


def _params_of(benchmark: dict[str, Any]) -> list[tuple[str, ...]]:
    return list(itertools.product(*benchmark["params"]))


def _cell_param_key(cell: dict[str, Any]) -> tuple[str, ...]:
    name = candidate_name(cell["mode"])
    if name is not None:
        return repr(cell["preset"]), repr(f"{cell['workload']}:{name}")
    return tuple(repr(cell[k]) for k in ("preset", "workload", "mode"))


def record_cells(results: Any, benchmarks: Any, cells: Iterable[dict[str, Any]]) -> None:
    """Add measured cells to an asv Results object, as asv's runner would have recorded them: compile modes
    under baselines.Baseline, kernels under test under candidates.Candidate."""
    cells = list(cells)
    kernel_cells = [c for c in cells if candidate_name(c["mode"]) is not None]
    mode_cells = [c for c in cells if candidate_name(c["mode"]) is None]
    _record_class(results, benchmarks, mode_cells, BENCHMARK_CLASS)
    _record_class(results, benchmarks, kernel_cells, CANDIDATE_CLASS)


def _record_class(results: Any, benchmarks: Any, cells: list[dict[str, Any]], benchmark_class: str) -> None:
    from asv.runner import BenchmarkResult

    if not cells:
        return
    for metric, name in metrics.benchmark_names(benchmark_class).items():
        bench = benchmarks[name]
        index = {p: i for i, p in enumerate(_params_of(bench))}
        n = len(index)
        result: list[Any] = [float("nan")] * n  # asv's 'not run' for unselected combinations
        samples: list[Any] = [None] * n
        number: list[Any] = [None] * n
        selected: set[int] = set()
        duration = 0.0
        for cell in cells:
            i = index.get(_cell_param_key(cell))
            if i is None:
                raise AsvError(f"no asv parameter combination for cell {_cell_param_key(cell)}")
            selected.add(i)
            duration += float(cell.get("wall_s") or 0.0)
            try:
                value = metric_value(cell, metric)
            except CellSkipped:
                result[i] = float("nan")  # asv's mark for 'n/a'
                continue
            except CellFailed:
                result[i] = None  # asv's 'failed'; the reason stays in the cell store
                continue
            if isinstance(value, dict):
                result[i], samples[i], number[i] = True, value["samples"], value["number"]
            else:
                result[i] = value
        if not selected:
            continue
        # asv keeps a benchmark's log in memory only (Results.save writes no stderr): none is passed
        res = BenchmarkResult(result=result, samples=samples, number=number, errcode=0, stderr="", profile=None)
        results.add_result(bench, res, selected_idx=selected, duration=duration, record_samples=True,
                           started_at=dt.datetime.now(dt.UTC))


def _record_launch(results: Any, benchmarks: Any, cells: list[dict[str, Any]]) -> None:
    from asv.runner import BenchmarkResult

    values = sorted(c["launch_us"] for c in cells if c.get("launch_us"))
    if values and HOST_BENCHMARK in benchmarks:
        res = BenchmarkResult(result=[values[len(values) // 2]], samples=[None], number=[None], errcode=0,
                              stderr="", profile=None)
        results.add_result(benchmarks[HOST_BENCHMARK], res)


def host_of(cells: list[dict[str, Any]]) -> dict[str, str] | None:
    """The environment the cells ran in; refuses cells from different versions (they must never mix)."""
    hosts = [c["host"] for c in cells if c.get("host")]
    for h in hosts[1:]:
        for key in VERSION_KEYS:
            if h.get(key) != hosts[0].get(key):
                raise AsvError(f"cells of one run disagree on {key}: {hosts[0].get(key)} vs {h.get(key)}")
    return hosts[0] if hosts else None


def record_run(conf: Any, python: str, machine: str, commit: str, date_ms: int, cells: list[dict[str, Any]],
               host: dict[str, str]) -> Path:
    """Write measured cells (and the host's launch floor) into asv's result file for this run."""
    env = existing_environment(conf, python)
    benchmarks = discover(conf, env, commit)
    entry = machine_entry(machine, host)
    write_machine_file(entry)  # so a plain `asv run --machine NAME` records the same version keys
    results = open_results(conf, env, entry, commit, date_ms)
    record_cells(results, benchmarks, cells)
    _record_launch(results, benchmarks, cells)
    benchmarks.save()  # benchmarks.json: asv publish reads the suite's description from it, as after asv run
    return save_results(conf, results, entry)


def open_results(conf: Any, env: Any, entry: dict[str, str], commit: str, date_ms: int) -> Any:
    """A Results object for (machine, commit, env), holding what is already on disk for it.

    Refuses when the file on disk was measured under other versions: they must never silently mix."""
    from asv.results import Results, get_filename

    params = dict(entry)
    params["python"] = env.python
    results = Results(params, {}, commit, date_ms, env.python, env.name, env.env_vars)
    path = Path(conf.results_dir) / get_filename(entry["machine"], commit, env.name)
    if path.exists():
        try:
            old = Results.load(str(path))
        except Exception as e:
            raise AsvError(f"{path} is not a readable asv result file ({e}); move it aside to re-run") from None
        for key in VERSION_KEYS:
            if old.get_all_result_keys() and key in old.params and str(old.params[key]) != str(entry[key]):
                raise AsvError(
                    f"{path.name} was measured with {key} {old.params[key]}, this environment has {entry[key]}: "
                    "use another virtualenv (asv keys results by interpreter path) or another --machine name"
                )
        results.load_data(conf.results_dir)
    return results


def save_results(conf: Any, results: Any, entry: dict[str, str]) -> Path:
    """Save atomically: asv writes in place, so write into a scratch tree and rename the files over."""
    from asv.machine import Machine

    final_dir = Path(conf.results_dir)
    final_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final_dir, prefix=".staging-") as tmp:
        results.save(tmp)
        machine = Machine()
        machine.__dict__.update(entry)
        machine.save(tmp)
        for src in sorted(Path(tmp).rglob("*.json")):
            dest = final_dir / src.relative_to(tmp)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dest)
    shutil.rmtree(final_dir / ".staging-", ignore_errors=True)
    return final_dir / entry["machine"] / Path(results._filename).name
