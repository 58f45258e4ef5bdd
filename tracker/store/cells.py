"""The cell store: one JSON file per measured cell, written atomically as soon as the cell finishes.

It is what makes a run resumable (a finished cell is never measured again for the same commit, machine
and torch version) and what lets every asv metric of a cell (tracker.metrics) come from one measurement,
although asv runs each in its own process. It is a cache beside the asv results, never published; the asv
result files are the record. Each record carries its format version and is read through the format's migrations
(tracker.store.formats.CELL), so that a store of any earlier version reads in today's shape.

Imports neither torch nor pandas: asv imports the benchmark suite in every benchmark process.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import socket
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from tracker import metrics
from tracker.errors import UsageError
from tracker.measure.cellresult import OK, CellResult
from tracker.measure.hostinfo import torch_version_files
from tracker.stats import LATENCY_MS, TOO_NOISY_SPREAD, relative_spread, set_aside, thin
from tracker.store import atomic, confined, formats

ENV_ROOT = "COMPILE_BASELINES_CELLS"  # root directory of the store
ENV_MACHINE = "COMPILE_BASELINES_MACHINE"  # asv machine name; hostname when unset
LAUNCH_FLOOR = "launch-floor.json"  # beside the cells: {"format": 1, "launch_us": ...}


def torch_version() -> str:
    """The installed torch's `torch.__version__` without importing torch (asv imports the suite in every process):
    read from torch/version.py, which some builds' package metadata does not match (2.11.0 against
    2.11.0+cu130); the results record `torch.__version__`, and the cell store must be found under the same name."""
    for text in torch_version_files():
        if match := _VERSION.search(text):
            return match.group(1)
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.M)


_LONGEST = 100  # a component's characters: the longest machine name (check_machine_name), far below NAME_MAX


def _safe(part: str) -> str:
    """`part` as one path component: other characters become _, a name of dots alone ("", ".", "..") never
    names the directory itself or its parent, and a name longer than _LONGEST (only results written by hand have
    one) is cut and told apart by its hash, so that no path of the store is too long to look up."""
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", part)
    if len(safe) > _LONGEST:
        safe = f"{safe[:_LONGEST - 17]}-{hashlib.sha256(part.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"
    return safe if safe.strip(".") else f"_{safe}"


class NameRefused(UsageError):
    """A machine name or commit that cannot name a directory or file of the results."""


_MACHINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")
_COMMIT = re.compile(r"[0-9a-fA-F]{7,40}")


def check_machine_name(machine: str) -> str:
    """The rule for machine names, wherever one is given (`run`, `import-csv`): it names a directory of the
    results and of the cell store, so letters, digits and . _ + -, starting with a letter or digit."""
    if not machine or not _MACHINE_NAME.fullmatch(machine):
        raise NameRefused(f"machine name {machine!r}: use letters, digits and . _ + -, starting with a letter or "
                          "digit (it names a directory)")
    return machine


def check_commit(commit: str) -> str:
    """A commit to record results under: a hexadecimal git hash (asv names result files by its first 8 digits)."""
    if not _COMMIT.fullmatch(commit or ""):
        raise NameRefused(f"commit {commit!r} is not a hexadecimal git hash (asv names result files by it)")
    return commit


@dataclass(frozen=True)
class RunKey:
    """Which run a cell belongs to: results of different commits, machines or torch versions never mix."""

    machine: str
    commit: str
    torch: str

    @classmethod
    def from_env(cls, environ: os._Environ[str] | dict[str, str] = os.environ) -> RunKey:
        # ASV_COMMIT is set by asv for benchmark processes; our runner sets it too.
        return cls(
            machine=environ.get(ENV_MACHINE) or socket.gethostname(),
            commit=environ.get("ASV_COMMIT") or "unknown",
            torch=torch_version(),
        )

    def dirname(self) -> str:
        return f"{_safe(self.machine)}/{_safe(self.commit)}/torch-{_safe(self.torch)}"


def default_cells_dir(results_dir: str | os.PathLike[str]) -> Path:
    """The cell store of a results directory: beside it, where `compile-baselines run` keeps it by default and
    where failure reasons are looked up."""
    return Path(results_dir).parent / "cells"


def default_root(environ: os._Environ[str] | dict[str, str] = os.environ) -> Path:
    """The store a benchmark process uses: $COMPILE_BASELINES_CELLS, else beside asv.conf.json's results
    directory (.asv/results)."""
    if environ.get(ENV_ROOT):
        return Path(environ[ENV_ROOT])
    return default_cells_dir(Path(environ.get("ASV_CONF_DIR") or ".") / ".asv" / "results")


def _one_name(name: object) -> bool:
    """Whether `name` (a preset's, a workload's, a mode's, as a record or a caller gives it) names one folder or file
    of the store: never its parent, never a path."""
    return isinstance(name, str) and name.strip(".") != "" and "/" not in name and "\0" not in name


class CellStore:
    """The cells of one run under `root`; nothing is read or written through a link under `root`
    (tracker.store.confined): a record reached through one reads as damaged and is measured again."""

    def __init__(self, root: str | os.PathLike[str], key: RunKey) -> None:
        self.root = Path(root)
        self.dir = self.root / key.dirname()
        self.key = key

    @classmethod
    def of_run(cls, root: str | os.PathLike[str], key: RunKey) -> CellStore | None:
        """The existing store of a run of the results, or None. A store written before torch_version() read
        torch/version.py may be named by the version without its local part (2.11.0 for 2.11.0+cu130)."""
        for torch in dict.fromkeys((key.torch, key.torch.split("+")[0])):
            store = cls(root, RunKey(key.machine, key.commit, torch))
            if store.dir.is_dir():
                return store
        return None

    def path(self, preset: str, workload: str, mode: str, replicate: int = 1) -> Path:
        """Replicate 1 is `MODE.json` (the only one most cells have), replicate r > 1 `MODE@r.json`. A name that is
        not one folder's ("..", "a/b") is a ValueError: it is no cell's."""
        if not (_one_name(preset) and _one_name(workload)):
            raise ValueError(f"preset {preset!r} or workload {workload!r} does not name a folder of the cell store")
        suffix = "" if replicate == 1 else f"@{replicate}"
        return self.dir / _safe(preset) / _safe(workload) / f"{_safe(mode)}{suffix}.json"

    def replicate(self, preset: str, workload: str, mode: str, replicate: int = 1) -> CellResult | None:
        """One measurement (one process, one compile) of a cell, or None when absent, unreadable or damaged
        (`problem`): then it is measured again."""
        data, why = _read(self.root, self.path(preset, workload, mode, replicate), (preset, workload, mode, replicate))
        return None if why or data is None else CellResult.from_json(data)

    def unusable(self, preset: str, workload: str, mode: str, replicate: int = 1) -> str | None:
        """Why the stored measurement cannot be used (`problem`), or None when it can or none is stored."""
        return _read(self.root, self.path(preset, workload, mode, replicate), (preset, workload, mode, replicate))[1]

    def damaged(self) -> list[tuple[Path, str]]:
        """Every stored measurement that cannot be used, with why (`problem`): `run` says so and measures it again."""
        return [(p, why) for p in self._records() if (why := _read(self.root, p)[1])]

    def _records(self) -> list[Path]:
        """The record files of the run, none reached through a link (each one found is a warning line)."""
        if (why := confined.problem(self.root, self.dir)) is not None:
            confined.warn_stderr(f"skipped the cells of {self.dir}: {why.reason}")
            return []
        return confined.files(self.dir, "*/*/*.json")

    def replicates(self, preset: str, workload: str, mode: str) -> list[CellResult]:
        """Every stored measurement of a cell, replicate 1 first; it stops at the first one missing."""
        out = []
        while (cell := self.replicate(preset, workload, mode, len(out) + 1)) is not None:
            out.append(cell)
        return out

    def get(self, preset: str, workload: str, mode: str) -> CellResult | None:
        """The cell as the results record it: its replicates combined (`combine`); None when none is stored."""
        reps = self.replicates(preset, workload, mode)
        return combine(reps) if reps else None

    def put(self, cell: CellResult) -> None:
        """Store one measurement, in the current format (tracker.store.formats.CELL); one that names no replicate is
        the cell's first."""
        replicate = int(cell.replicate_number)
        path = self.path(cell.preset, cell.workload, cell.mode, replicate)
        record = formats.CELL.stamp({**cell.to_json(), "replicate": replicate})
        atomic.write_json(confined.check(self.root, path.parent) / path.name, record)

    def remove(self, preset: str, workload: str, mode: str, replicate: int | None = None) -> None:
        """Forget one replicate of a cell, or all of them (None), so that the next run measures it again."""
        for r in [replicate] if replicate else range(1, len(self.replicates(preset, workload, mode)) + 1):
            path = self.path(preset, workload, mode, r)
            (confined.check(self.root, path.parent) / path.name).unlink(missing_ok=True)

    def launch_floor(self) -> float | None:
        """This run's launch floor (us), once a cell has measured it: a host property, measured once a run.
        FormatTooNew where a newer version of the tool wrote it (so that it is not measured and written again)."""
        path = self.dir / LAUNCH_FLOOR
        try:
            value = formats.LAUNCH_FLOOR.read(confined.read_json(self.root, path), str(path))["launch_us"]
        except formats.FormatTooNew:
            raise
        except (OSError, ValueError, KeyError, TypeError, formats.FormatError):
            return None
        return float(value) if isinstance(value, (int, float)) and value > 0 else None

    def set_launch_floor(self, launch_us: float) -> float:
        """Record the run's launch floor unless a concurrent cell recorded one first; the floor that stands."""
        with atomic.locked(confined.check(self.root, self.dir) / f".{LAUNCH_FLOOR}.lock"):
            first = self.launch_floor()
            if first is not None:
                return first
            atomic.write_json(self.dir / LAUNCH_FLOOR, formats.LAUNCH_FLOOR.stamp({"launch_us": launch_us}))
            return launch_us

    def all(self) -> list[CellResult]:
        """Every stored measurement that is a JSON object, damaged ones included (`problem` tells them), replicates
        each on its own (a record says which in `replicate`), in the current format; FormatTooNew where one was
        written by a newer version of the tool."""
        out = []
        for p in self._records():
            try:
                out.append(CellResult.from_json(_load(self.root, p)))
            except formats.FormatTooNew:
                raise
            except (OSError, ValueError, formats.FormatError):
                continue
        return out

    def cells(self) -> list[CellResult]:
        """Every stored cell, its replicates combined."""
        keys = dict.fromkeys((c.preset, c.workload, c.mode) for c in self.all() if names_its_cell(c))
        return [cell for k in keys if (cell := self.get(*k)) is not None]


def names_its_cell(record: CellResult) -> bool:
    """Whether a stored record names its cell: a preset, a workload and a mode, each a text (a damaged one may not)."""
    return all(record.has(k) and isinstance(record.value(k), str) for k in ("preset", "workload", "mode"))


def combine(replicates: list[CellResult]) -> CellResult:
    """A cell measured in several fresh processes (each compiling anew) as the results record it: the replicate
    with the lowest median stands for the cell (the baseline to beat is the best compile torch.compile gave;
    its samples, fingerprint and figures are that replicate's), among those whose samples are not too noisy to
    judge while one is not (a disturbed process speaks for its process, not for the compile), and `compiles_ms`
    lists every ok replicate's median, `compiles_kept_ms` those the spread over compiles is read from (all but a
    gross outlier, tracker.stats.set_aside). Its compile_s is the first
    replicate's, the one cold compile: the further compiles reuse the first's Triton binaries
    (tracker.runner.workerenv.cache_dirs). Failed replicates are left out while one is ok; when none is, the first
    stands (its reason is the cell's).

    A replicate with a value no measurement gives (`problem`: a latency that is negative, zero, NaN or infinite,
    samples that are not numbers) never stands for the cell, nor counts among its compiles: it is left out like a
    failed one, and said in `rejected` ("replicate 2: median_ms -1.0 is not ..."). When none is usable, the cell is
    failed with that reason."""
    whys = [problem(c.to_json()) for c in replicates]
    rejected = [f"replicate {c.replicate_number}: {why}" for c, why in zip(replicates, whys, strict=True) if why]
    usable = [c for c, why in zip(replicates, whys, strict=True) if not why]
    ok = [c for c in usable if c.status == OK]
    if not ok:
        out = replace(usable[0]) if usable else _failed(replicates[0], rejected[0])
        if rejected:
            out.rejected = rejected
        return out
    clean = [c for c in ok if not _too_noisy(c)] or ok
    best = min(clean, key=lambda c: c.median_ms or 0.0)  # an ok one's is a latency (`problem`)
    compiles = [c.median_ms for c in ok if c.median_ms is not None]
    out = replace(best, compiles_ms=compiles, compiles_kept_ms=set_aside(compiles)[0])
    first = next((i for i, c in enumerate(replicates) if c.replicate_number == 1), None)
    if first is not None and replicates[first].status == OK and not whys[first]:
        out.compile_s = replicates[first].compile_s
    out.replicates_failed = len(replicates) - len(ok)
    if rejected:
        out.rejected = rejected
    return out


def _failed(record: CellResult, why: str) -> CellResult:
    """A damaged measurement as the failed cell it stands for: its names, device and replicate, as far as it has
    them."""
    keys = tuple(k for k in ("preset", "workload", "mode", "device", "replicate") if record.has(k))
    return CellResult(record.preset, record.workload, record.mode, record.device, "failed",
                      reason=f"damaged record: {why}", replicate=record.replicate,
                      json_keys=(*keys, "status", "reason", "samples_ms"))


STATUSES = ("ok", "failed", "skipped")  # tracker.measure.harness's


def is_latency(value: Any) -> bool:
    """A latency some measurement could give: a finite positive number of ms within LATENCY_MS."""
    return type(value) in (int, float) and LATENCY_MS[0] <= value <= LATENCY_MS[1]


def _load(root: Path, path: Path) -> dict[str, Any]:
    """The measurement stored in `path`, in the current format (tracker.store.formats.CELL: older ones migrated);
    FormatTooNew when a newer version of the tool wrote it, FormatError when it is no measurement of any format."""
    return formats.CELL.read(confined.read_json(root, path), str(path))


def _read(root: Path, path: Path, where: tuple[str, str, str, int] | None = None) -> tuple[Any, str | None]:
    """A stored measurement in the current format and why it cannot be used (`problem`, reached through a link, not
    readable JSON, no format version); (None, None) when there is no such file. A record of a newer format raises
    FormatTooNew: it is not damaged, and measuring its cell again would overwrite it."""
    try:
        data = confined.read_json(root, path)
    except FileNotFoundError:
        return None, None
    except confined.Unconfined as e:
        return None, e.reason
    except (OSError, ValueError, RecursionError) as e:
        return None, f"not readable JSON ({e})"
    if not isinstance(data, dict):
        return None, problem(data, where)
    try:
        data = formats.CELL.read(data, str(path))
    except formats.FormatTooNew:
        raise
    except formats.FormatError:
        return None, f"{formats.KEY} {data.get(formats.KEY)!r} is not a format version"
    return data, problem(data, where)


def problem(record: Any, where: tuple[str, str, str, int] | None = None) -> str | None:
    """Why a stored measurement cannot be used, or None: not an object; another cell's (`where`: the preset,
    workload, mode and replicate its path names); a status that is not ok, failed or skipped; a failure or skip
    without its reason; an ok one whose latency (median_ms, samples_ms) is not a positive finite number of ms
    within LATENCY_MS, or whose compile time (required), launch floor, quantiles or peak memory is not a non-negative
    number."""
    if not isinstance(record, dict):
        return f"a {type(record).__name__}, not a measurement"
    if bad := [k for k in ("preset", "workload") if k in record and not _one_name(record[k])]:  # the mode is _safe'd
        return f"{bad[0]} {record[bad[0]]!r} is not a name"
    if where is not None:
        named = (record.get("preset"), record.get("workload"), record.get("mode"), record.get("replicate"))
        if named != where:
            return f"it records {'/'.join(map(str, named))}, not the cell its path names"
    status = record.get("status")
    if status not in STATUSES:
        return f"status {status!r} is not one of {', '.join(STATUSES)}"
    if status != "ok":
        return None if isinstance(record.get("reason"), str) else f"a {status} measurement without its reason"
    if not is_latency(record.get("median_ms")):
        return f"median_ms {record.get('median_ms')!r} is not a latency (a positive, finite number of ms)"
    samples = record.get("samples_ms")
    if not isinstance(samples, list) or not samples or not all(map(is_latency, samples)):
        return "samples_ms is not a list of latencies (positive, finite numbers of ms)"
    for key in ("compile_s", "launch_us", "peak_mem_bytes", "process_peak_bytes", "p25_ms", "p99_ms"):
        value = record.get(key)
        if (value is not None or key == "compile_s") and not (type(value) in (int, float) and 0 <= value < math.inf):
            return f"{key} {value!r} is not a non-negative number"
    return None


def _too_noisy(cell: CellResult) -> bool:
    """Its samples' IQR over TOO_NOISY_SPREAD of its median (the cell store keeps no upper quartile: the samples)."""
    return relative_spread(cell.median_ms, None, None, cell.samples_ms) > TOO_NOISY_SPREAD


def stored_form(cell: CellResult) -> CellResult:
    """A measured cell as stored: samples thinned (its median/p25/p99 were computed from all of them)."""
    return replace(cell, n_samples=len(cell.samples_ms or []), samples_ms=thin(cell.samples_ms or []))


class CellSkipped(NotImplementedError):
    """asv records a NotImplementedError from setup as 'skipped' (n/a), not as a failure."""


class CellFailed(RuntimeError):
    pass


def check_measured(cell: CellResult) -> None:
    """Raise as asv should record a cell that was not measured: CellSkipped or CellFailed, with its reason."""
    if cell.status == "skipped":
        raise CellSkipped(cell.reason)
    if cell.status != OK:
        raise CellFailed(cell.reason)


def metric_value(cell: CellResult, metric: str) -> Any:
    """A stored cell's value for one metric of tracker.metrics, as asv takes it (samples as {"samples", "number"});
    raises CellSkipped/CellFailed as asv should record it."""
    check_measured(cell)
    m = metrics.METRICS.get(metric)
    if m is None:
        raise KeyError(f"unknown metric {metric!r}")
    value = m.value(cell)
    if value is None and m.absent is not None:
        raise CellSkipped(m.absent)
    if m.sampled:
        return {"samples": thin(value), "number": 1}
    return value
