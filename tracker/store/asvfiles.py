"""asv's files, written through asv's own classes: the machine file (with our version keys) and results.

asv records no GPU or library versions for an `existing` environment, so the machine entry carries
gpu, driver, cuda, torch and triton; asv copies machine keys into every result file's params, which is
what makes them selectors in `asv publish` and the per-PyTorch-version axis of the tracker.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import os
import platform
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tracker import metrics
from tracker.errors import ToolError
from tracker.measure.cellresult import CellResult
from tracker.paths import RESULTS_SUBDIR, workspace_subdir
from tracker.store import atomic, confined
from tracker.store.cells import CellFailed, CellSkipped, check_commit, check_machine_name, metric_value
from workloads.kernels.registry import candidate_name
from workloads.names import is_plugin_workload

BENCHMARK_CLASS = "baselines.Baseline"
HOST_BENCHMARK = "baselines.Host.track_launch_overhead"
# Kernels under test: params (preset, "workload:name"); a cell's mode is "kernel:<name>".
CANDIDATE_CLASS = "candidates.Candidate"
# The installed plugins' workloads and their candidates, over the plugins' own presets: the study's grid above never
# changes with what is installed.
PLUGIN_CLASS = "baselines.PluginBaseline"
PLUGIN_CANDIDATE_CLASS = "candidates.PluginCandidate"
MODE_CLASSES = (BENCHMARK_CLASS, PLUGIN_CLASS)
CANDIDATE_CLASSES = (CANDIDATE_CLASS, PLUGIN_CANDIDATE_CLASS)
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
    except (UserError, ValueError, OSError) as e:  # missing, not JSON, a directory
        raise AsvError(f"cannot read asv config {path}: {e}") from None
    # asv resolves the config's relative paths against the working directory (its CLI runs from the config's
    # folder); the tracker may run anywhere, so they are resolved against the config's folder
    base = Path(path).resolve().parent
    for attr in ("benchmark_dir", "results_dir", "html_dir", "repo"):
        value = getattr(conf, attr, None)
        if isinstance(value, str) and value and "://" not in value:
            setattr(conf, attr, str(base / value))
    if results_dir:
        conf.results_dir = os.path.abspath(results_dir)
    return conf


def results_dir_for(config: str | os.PathLike[str], given: str | None = None) -> str:
    """The results directory a command reads or writes: `given`, else .asv/results of the kernel repository it works
    for (paths.workspace_subdir), else the asv config's."""
    return given or workspace_subdir(config, RESULTS_SUBDIR) or load_conf(config).results_dir


def results_lock(results_dir: str | os.PathLike[str]) -> Any:
    """The lock every writer of `results_dir` holds from reading a result file to saving it: a flock on the
    directory itself, which leaves no file in it (the nightly commits the directory to the results branch)."""
    return atomic.locked(results_dir, directory=True)


def check_writable(results_dir: str | os.PathLike[str]) -> None:
    """Refuse at once (before measuring or merging anything) a results directory that cannot be written: a file
    in its place, no permission, a read-only file system."""
    root = Path(results_dir)
    try:
        root.mkdir(parents=True, exist_ok=True)
        with results_lock(root), tempfile.NamedTemporaryFile(dir=root, prefix=".probe-"):
            pass
    except atomic.LockError as e:
        raise AsvError(str(e)) from None
    except OSError as e:
        raise AsvError(f"cannot write results into {root}: {e.strerror or e}") from None


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
    try:
        with atomic.locked(path.with_name(f".{path.name}.lock")):  # runs of other machines write it too
            data: dict[str, Any] = {}
            if path.exists():
                try:
                    data = json.loads(path.read_text())
                except ValueError as e:
                    raise AsvError(f"{path} is not valid JSON ({e}); fix or remove it") from None
            data["version"] = 1
            data[entry["machine"]] = entry
            atomic.write_json(path, data)
    except OSError as e:
        raise AsvError(f"cannot write asv's machine file {path}: {e.strerror or e}") from None
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
        with importable(Path(conf.benchmark_dir).resolve().parent):
            return Benchmarks.discover(conf, repo, [env], [commit])
    except UserError as e:
        raise AsvError(f"asv benchmark discovery failed: {e}") from None


@contextlib.contextmanager
def importable(checkout: Path) -> Iterator[None]:
    """The suite imports tracker and workloads from its checkout, installed or not: asv's processes drop PYTHONPATH
    and take ASV_PYTHONPATH, so the checkout goes first on that for the duration (a clone that is not installed
    would otherwise measure every cell and then fail in asv's discovery)."""
    old = os.environ.get("ASV_PYTHONPATH")
    os.environ["ASV_PYTHONPATH"] = os.pathsep.join([str(checkout), *([old] if old else [])])
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("ASV_PYTHONPATH", None)
        else:
            os.environ["ASV_PYTHONPATH"] = old


def _params_of(benchmark: dict[str, Any]) -> list[tuple[str, ...]]:
    return list(itertools.product(*benchmark["params"]))


def param_key(preset: str, workload: str, mode: str) -> tuple[str, ...]:
    """A cell's parameters in its asv benchmark, as asv writes them (a kernel's: preset, "workload:name")."""
    name = candidate_name(mode)
    if name is not None:
        return repr(preset), repr(f"{workload}:{name}")
    return repr(preset), repr(workload), repr(mode)


def benchmark_class(workload: str, mode: str) -> str:
    """The asv class a cell is recorded under: the study's or the plugins', modes or kernels under test."""
    kernel = candidate_name(mode) is not None
    return (CANDIDATE_CLASSES if kernel else MODE_CLASSES)[is_plugin_workload(workload)]


def record_cells(results: Any, benchmarks: Any, cells: Iterable[CellResult]) -> None:
    """Add measured cells to an asv Results object, as asv's runner would have recorded them: compile modes
    under baselines.Baseline (a plugin's workload: baselines.PluginBaseline), kernels under test under
    candidates.Candidate (candidates.PluginCandidate)."""
    by_class: dict[str, list[CellResult]] = {}
    for c in cells:
        by_class.setdefault(benchmark_class(c.workload, c.mode), []).append(c)
    for benchmark, chosen in by_class.items():
        _record_class(results, benchmarks, chosen, benchmark)


def _new_points(results: Any, bench: dict[str, Any]) -> set[int]:
    """The parameter combinations of `bench` that the result already held for it lacks (a preset or workload added
    since): asv would fill them with null, its mark of a failure, where nothing was run."""
    name = bench["name"]
    if name not in results.get_all_result_keys() or results.benchmark_version.get(name) != bench["version"]:
        return set()  # nothing to merge with: asv keeps what is passed, NaN where nothing was run
    old = set(itertools.product(*(results.get_result_params(name) or [])))
    return {i for i, p in enumerate(_params_of(bench)) if p not in old}


def _record_class(results: Any, benchmarks: Any, cells: list[CellResult], benchmark_class: str) -> None:
    from asv.runner import BenchmarkResult

    if not cells:
        return
    for metric, name in metrics.benchmark_names(benchmark_class).items():
        if name not in benchmarks:  # asv's discovery process imported the suite without the cells' plugin
            raise AsvError(f"asv's discovery of the suite has no {name} for {cells[0].workload}: its plugin is "
                           "not importable in asv's processes, which drop PYTHONPATH (set ASV_PYTHONPATH too, or "
                           "pip install it)")
        bench = benchmarks[name]
        index = {p: i for i, p in enumerate(_params_of(bench))}
        n = len(index)
        result: list[Any] = [float("nan")] * n  # asv's 'not run' for unselected combinations
        samples: list[Any] = [None] * n
        number: list[Any] = [None] * n
        selected: set[int] = set()
        duration = 0.0
        for cell in cells:
            key = param_key(cell.preset, cell.workload, cell.mode)
            i = index.get(key)
            if i is None:
                raise AsvError(f"no asv parameter combination for cell {key}")
            selected.add(i)
            duration += float(cell.wall_s or 0.0)
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
        selected |= _new_points(results, bench)  # recorded as not run (NaN), not as asv's null
        # asv keeps a benchmark's log in memory only (Results.save writes no stderr): none is passed
        res = BenchmarkResult(result=result, samples=samples, number=number, errcode=0, stderr="", profile=None)
        results.add_result(bench, res, selected_idx=selected, duration=duration, record_samples=True,
                           started_at=dt.datetime.now(dt.UTC))


def _record_launch(results: Any, benchmarks: Any, cells: list[CellResult]) -> None:
    from asv.runner import BenchmarkResult

    values = sorted(c.launch_us for c in cells if c.launch_us)
    if values and HOST_BENCHMARK in benchmarks:
        res = BenchmarkResult(result=[values[len(values) // 2]], samples=[None], number=[None], errcode=0,
                              stderr="", profile=None)
        results.add_result(benchmarks[HOST_BENCHMARK], res)


def host_of(cells: list[CellResult]) -> dict[str, str] | None:
    """The environment the cells ran in; refuses cells from different versions (they must never mix)."""
    hosts = [c.host for c in cells if c.host]
    for h in hosts[1:]:
        for key in VERSION_KEYS:
            if h.get(key) != hosts[0].get(key):
                raise AsvError(f"cells of one run disagree on {key}: {hosts[0].get(key)} vs {h.get(key)}")
    return hosts[0] if hosts else None


def suite(conf: Any, python: str, commit: str) -> tuple[Any, Any]:
    """(asv's environment for `python`, the suite as asv discovers it there): what recording a run needs; `run` asks
    for it while it measures, so an environment that cannot import the suite fails in seconds, not after the run."""
    env = existing_environment(conf, python)
    return env, discover(conf, env, commit)


def record_run(conf: Any, python: str, machine: str, commit: str, date_ms: int, cells: list[CellResult],
               host: dict[str, str], entry: dict[str, str] | None = None,
               discovered: tuple[Any, Any] | None = None) -> Path:
    """Write measured cells (and the host's launch floor) into asv's result file for this run. `entry`: the
    machine entry to record, when it is not this host's (a run measured elsewhere, recorded here; `host` is then
    not read, and this host's asv machine file is left alone). `discovered`: `suite`'s answer, when the caller
    already has it."""
    env, benchmarks = discovered or suite(conf, python, commit)
    if entry is None:
        entry = machine_entry(machine, host)
        write_machine_file(entry)  # so a plain `asv run --machine NAME` records the same version keys
    # Concurrent runs into one results directory (other workloads of the same commit, say) each add their cells
    # to what the file holds when they hold the lock, never to what it held before a neighbour saved.
    with results_lock(conf.results_dir):
        results = open_results(conf, env, entry, commit, date_ms)
        record_cells(results, benchmarks, cells)
        _record_launch(results, benchmarks, cells)
        # benchmarks.json: asv publish reads the suite's description from it, as after asv run
        return save_results(conf, results, entry, benchmarks=benchmarks._all_benchmarks)


def open_results(conf: Any, env: Any, entry: dict[str, str], commit: str, date_ms: int) -> Any:
    """A Results object for (machine, commit, env), holding what is already on disk for it.

    Refuses when the file on disk was measured under other versions: they must never silently mix."""
    from asv.results import Results, get_filename

    params = dict(entry)
    params["python"] = env.python
    results = Results(params, {}, commit, date_ms, env.python, env.name, env.env_vars)
    path = Path(conf.results_dir) / get_filename(entry["machine"], commit, env.name)
    if (why := confined.problem(conf.results_dir, path)) is not None:
        raise AsvError(f"cannot record into {path}: {why}; remove it")
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


def sweep_scratch(results_dir: Path) -> None:
    """Delete the scratch files a writer killed mid-write left in `results_dir` (a scratch tree of a result file, a
    write probe, a temporary file of an atomic write), which the nightly would otherwise commit. Only while holding
    `results_lock`: every writer makes its scratch files under it, so any found then is a dead writer's."""
    for tree in confined.folders(results_dir, "*/.staging-*"):  # never one under a machine folder that is a link
        shutil.rmtree(tree, ignore_errors=True)
    for scratch in (*results_dir.glob(".probe-*"), *results_dir.glob(".*.tmp")):
        scratch.unlink(missing_ok=True)


def save_results(conf: Any, results: Any, entry: dict[str, str], benchmarks: dict[str, Any] | None = None) -> Path:
    """Save the result file and the machine's machine.json (and `benchmarks.json`, asv's suite description, when
    given) atomically: asv writes in place, so write into a scratch tree and rename the files over.

    The caller holds `results_lock` from reading the file to here. The scratch tree is unique to this writer and
    lies inside the machine's folder, where nothing that lists result files (`*/*.json`) looks into it; what a
    killed writer left there is swept first (`sweep_scratch`)."""
    from asv.benchmarks import Benchmarks
    from asv.machine import Machine
    from asv.util import write_json

    check_machine_name(entry["machine"])  # names the folder the files go to
    check_commit(results.commit_hash)  # names the file
    final_dir = Path(conf.results_dir)
    machine_dir = final_dir / entry["machine"]
    try:
        confined.check(final_dir, machine_dir)  # a machine folder that is a link is never written through
        if machine_dir.exists() and not machine_dir.is_dir():
            raise AsvError(f"cannot write results into {final_dir}: {machine_dir.name} there is a file where the "
                           "machine's folder goes; move it aside")
        sweep_scratch(final_dir)
        machine_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=machine_dir, prefix=".staging-") as tmp:
            results.save(tmp)
            machine = Machine()
            machine.__dict__.update(entry)
            machine.save(tmp)
            if benchmarks is not None:
                write_json(Benchmarks.get_benchmark_file_path(tmp), benchmarks, Benchmarks.api_version)
            # the result file first, machine.json and benchmarks.json after: a reader never sees a machine.json
            # whose versions no result file has
            staged = sorted(Path(tmp).rglob("*.json"), key=lambda p: (p.name in ("machine.json", "benchmarks.json"),
                                                                      str(p)))
            for src in staged:
                dest = final_dir / src.relative_to(tmp)
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dest)
    except OSError as e:
        raise AsvError(f"cannot write results into {final_dir}: {e.strerror or e}") from None
    return machine_dir / Path(results._filename).name
