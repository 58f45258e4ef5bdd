"""Run a set of cells: one process per measurement, `jobs` at a time, GPU timing serialized by a lock per GPU.

Each process is forked from a server that has imported torch and the compiler once (tracker.runner.forkserver).
Workers overlap their CPU-bound parts (tracing, inductor and Triton compilation); every GPU timing (ours and
autotuning's) holds its GPU's cross-process lock (tracker.measure.gpulock). With several GPUs (`gpus`) each
measurement runs on one of them (tracker.runner.gpus), the workers shared. Finished cells land in the cell store at
once, so an interrupted run resumes where it stopped."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from tracker import stats
from tracker.errors import ToolError, UsageError
from tracker.measure import gpulock
from tracker.measure.harness import FAILED, Settings
from tracker.measure.hostinfo import host_info
from tracker.paths import REPO_ROOT
from tracker.publish import units
from tracker.runner.forkserver import Child, ForkServer, stderr_tail
from tracker.runner.gpus import GpuSlots
from tracker.runner.worker import ENV_GPU, ENV_SETTINGS, EXIT_NOT_KEPT, GPU_INDEX
from tracker.store import asvfiles, remove
from tracker.store.cells import ENV_MACHINE, ENV_ROOT, CellStore, RunKey, torch_version
from workloads import catalog
from workloads import registry as workload_registry
from workloads.kernels import registry as kernel_registry
from workloads.modes import AUTOTUNED_MODES, BY_NAME, MODES, REFERENCE
from workloads.names import is_plugin_workload

# The autotuned modes benchmark GEMM and convolution templates: the workloads tagged gemm or conv cost them most.
_AUTOTUNED_WORKLOADS = frozenset(w.name for w in workload_registry.WORKLOADS if {"gemm", "conv"} & set(w.tags))


@dataclass(frozen=True, order=True)
class CellId:
    preset: str
    workload: str
    mode: str

    def __str__(self) -> str:
        return f"{self.preset} {self.workload} {self.mode}"


@dataclass(frozen=True, order=True)
class Job:
    """One measurement: replicate `replicate` (1, 2, ...) of a cell, in a process of its own."""

    cell: CellId
    replicate: int = 1

    def __str__(self) -> str:
        return str(self.cell) if self.replicate == 1 else f"{self.cell} #{self.replicate}"


def _autotuned(workload: str) -> bool:
    if workload in _AUTOTUNED_WORKLOADS:
        return True
    return is_plugin_workload(workload) and bool({"gemm", "conv"} & set(workload_registry.get(workload).tags))


def expected_cost(cell: CellId) -> float:
    if kernel_registry.candidate_name(cell.mode) is not None:
        return 8.0  # eager inputs plus a kernel's JIT compile
    mode = BY_NAME.get(cell.mode)
    if mode is None:
        return 20.0
    cost = mode.cost
    if mode.autotuned and _autotuned(cell.workload):
        cost += 30.0
    return cost


def plan(presets: Iterable[str], workloads: Iterable[str] | None = None, modes: Iterable[str] = MODES,
         kernels: Iterable[str] = ()) -> list[CellId]:
    """The cells the study measures among the given presets, workloads and modes, in the study's order, each
    workload's compile modes followed by its selected candidates ("kernel:<name>", see `kernel_modes`). Workloads
    default to every one, the installed plugins' included (workloads.catalog); a plugin's workload has cells in
    the presets it declares only."""
    all_workloads = catalog.workload_names()
    presets, modes = list(presets), list(modes)
    workloads = list(all_workloads if workloads is None else workloads)
    for kind, given, known in (("preset", presets, catalog.preset_names()), ("workload", workloads, all_workloads),
                               ("mode", modes, MODES)):
        unknown = [x for x in given if x not in known]
        if unknown:
            raise UsageError(f"unknown {kind} {unknown[0]!r}; choose from {', '.join(known)}")
    picked = kernel_modes(kernels, workloads)
    return [CellId(p, w, m) for p in presets for w in all_workloads if w in workloads and catalog.applies(p, w)
            for m in [*(m for m in MODES if m in modes), *picked.get(w, [])]]


def kernel_modes(selectors: Iterable[str], workloads: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Candidate modes per workload for `selectors`: "all", a candidate name (that name for every workload
    that has it) or "workload:name". Only candidates of `workloads` are kept; an unknown one is a UsageError."""
    workloads = set(catalog.workload_names() if workloads is None else workloads)
    registered = kernel_registry.candidates()
    chosen: dict[str, list[str]] = {}
    for sel in selectors:
        if sel == "all":
            found = registered
        elif ":" in sel:
            found = [kernel_registry.get(*kernel_registry.split_key(sel))]
        else:
            found = [c for c in registered if c.name == sel]
            if not found:
                known = ", ".join(c.key for c in registered) or "none"
                raise UsageError(f"unknown candidate {sel!r}; registered: {known}")
        for c in found:
            if c.workload in workloads and c.mode not in chosen.setdefault(c.workload, []):
                chosen[c.workload].append(c.mode)
    return chosen


def shard(cells: list[CellId], index: int, count: int) -> list[CellId]:
    """Shard `index` (1-based) of `count`: greedy longest-first by expected cost, deterministic."""
    if not 1 <= index <= count:
        raise ValueError(f"shard {index}/{count}: i must be between 1 and n")
    loads = [0.0] * count
    owner: dict[CellId, int] = {}
    for cell in sorted(cells, key=lambda c: (-expected_cost(c), c)):
        k = min(range(count), key=lambda j: (loads[j], j))
        loads[k] += expected_cost(cell)
        owner[cell] = k
    return [c for c in cells if owner[c] == index - 1]


def queue_order(cells: list[CellId]) -> list[CellId]:
    """Longest first (the short ones fill the gaps at the end), with the eager cells spread evenly among the
    rest from the very first: they compile nothing, so they are almost all GPU-lock time and keep the GPU
    busy while the heaviest cells compile, rather than queueing for it at the end."""
    by_cost = sorted(cells, key=lambda c: (-expected_cost(c), c))
    light = [c for c in by_cost if c.mode == REFERENCE]
    heavy = [c for c in by_cost if c.mode != REFERENCE]
    if not light or not heavy:
        return by_cost
    step, out = len(heavy) / len(light), []
    for i, cell in enumerate(heavy):
        while len(out) - i < len(light) and (len(out) - i) * step <= i:
            out.append(light[len(out) - i])
        out.append(cell)
    return out + light[len(out) - len(heavy):]


def usable_cpus() -> list[int]:
    """The cores this process may run on: a shard started under `taskset` (one per GPU of a host) counts only
    its own, so shards do not reserve the same timing cores or oversubscribe the compilers."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


@dataclass(frozen=True)
class RunConfig:
    store_root: Path
    machine: str
    commit: str
    jobs: int = 1
    device: str | None = None
    settings: Settings = field(default_factory=Settings)
    cell_timeout_s: float = 1800.0  # the process is killed past this (asv's benchmark timeout too)
    warm_cache_dir: Path | None = None  # None: a fresh compile cache per cell (cold compile times)
    retry_failed: bool = False
    # Each cell of `replicated_modes` (all modes: None) is measured in this many fresh processes, each compiling
    # anew; the results record the best and the spread (tracker.store.cells.combine).
    replicates: int = 1
    replicated_modes: tuple[str, ...] | None = AUTOTUNED_MODES
    # Cells measured in a number of processes of their own, whatever `replicates` says (a confirmation's candidates)
    replicates_per_cell: dict[CellId, int] = field(default_factory=dict)
    # The GPUs to measure on, as CUDA_VISIBLE_DEVICES names them (tracker.runner.gpus); none: the process's default
    # device (a CPU run, a confirmation).
    gpus: tuple[str, ...] = ()

    def replicates_of(self, cell: CellId) -> int:
        if cell in self.replicates_per_cell:
            return max(1, self.replicates_per_cell[cell])
        if self.replicated_modes is None or cell.mode in self.replicated_modes:
            return max(1, self.replicates)
        return 1

    def settings_of(self, cell: CellId) -> Settings:
        """A replicated cell times each replicate for its share of the timing budget: the cell's timing costs what
        one measurement's does, and what differs between compiles is far larger than what more samples resolve."""
        n = self.replicates_of(cell)
        return self.settings if n == 1 else replace(self.settings, rep_ms=self.settings.rep_ms / n)

    def timing_cpus(self, slot: int = 0) -> list[int]:
        """Two cores for the process that holds a GPU's lock (the `slot`-th GPU's), when cells run in parallel and at
        least four cores are left to compile on."""
        cpus, n = usable_cpus(), max(1, len(self.gpus))
        return cpus[2 * slot:2 * slot + 2] if self.jobs > 1 and len(cpus) >= 2 * n + 4 else []

    def worker_env(self, cell: CellId, inductor_cache: str, triton_cache: str,
                   slot: int | None = None) -> dict[str, str]:
        """The environment of a worker measuring `cell` with these compile caches; `slot`: its GPU's position in
        `gpus`."""
        env = dict(os.environ)
        timing = self.timing_cpus(slot or 0)
        compile_cores = len(usable_cpus()) - len(timing) * max(1, len(self.gpus))
        lock = ".gpu.lock"
        if slot is not None:
            gpu = self.gpus[slot]
            lock = f".gpu-{''.join(c if c.isalnum() else '_' for c in gpu)}.lock"
            env.update({"CUDA_VISIBLE_DEVICES": gpu, ENV_GPU: gpu,
                        gpulock.ENV_RESERVED_CPUS: ",".join(str(c) for k in range(len(self.gpus))
                                                            for c in self.timing_cpus(k))})
        env.update({
            ENV_ROOT: str(self.store_root),
            ENV_MACHINE: self.machine,
            "ASV_COMMIT": self.commit,
            ENV_SETTINGS: json.dumps(asdict(self.settings_of(cell))),
            gpulock.ENV_LOCK: str(self.store_root / lock),
            gpulock.ENV_TIMING_CPUS: ",".join(map(str, timing)),
            # Share the other cores among the compiling workers.
            "TORCHINDUCTOR_COMPILE_THREADS": str(max(1, compile_cores // max(1, self.jobs))),
            "TORCHINDUCTOR_CACHE_DIR": inductor_cache,
            "TRITON_CACHE_DIR": triton_cache,
            "PYTHONUNBUFFERED": "1",
        })
        if self.device:
            env["COMPILE_BASELINES_DEVICE"] = self.device
        return env


class Progress:
    """One line per finished cell: counts, failures, elapsed and ETA; at the end, how GPU-bound the run was."""

    def __init__(self, total: int, out: TextIO | None = None) -> None:
        # sys.stderr when called, not when imported: the CLI's stream, which shows controls visibly (tracker.cli)
        self.total, self.done, self.failed, self.out = total, 0, 0, out or sys.stderr
        self.start = time.monotonic()
        self._lock = threading.Lock()
        self._failed: dict[Job, bool] = {}  # a measurement re-run alone replaces its first result
        self._held_s: dict[Job, float] = {}  # seconds each measurement held the GPU lock
        self._gpu_held_s: dict[str, float] = {}  # the same, summed per GPU of a run on several

    def cell_done(self, job: Job, result: dict[str, Any]) -> None:
        with self._lock:
            self._failed[job] = result.get("status") == FAILED
            self.done, self.failed = len(self._failed), sum(self._failed.values())
            self._held_s[job] = result.get("lock_held_s") or 0.0
            if result.get(GPU_INDEX) is not None:
                gpu = str(result[GPU_INDEX])
                self._gpu_held_s[gpu] = self._gpu_held_s.get(gpu, 0.0) + self._held_s[job]
            elapsed = time.monotonic() - self.start
            eta = elapsed / self.done * (self.total - self.done)
            status = result.get("status", "?")
            detail = (f"{result['median_ms']:.4f} ms, compile {result['compile_s']:.1f} s" if status == "ok"
                      else result.get("reason", "")[:90])
            print(f"[{self.done:>{len(str(self.total))}}/{self.total}] {job}: {status} {detail} | "
                  f"{self.failed} failed | {_fmt(elapsed)} elapsed, ETA {_fmt(eta)}", file=self.out, flush=True)

    def expect(self, more: int) -> None:
        """More (or, negative, fewer) measurements than planned: a cell whose first measurement failed asks for none of
        its further compiles."""
        with self._lock:
            self.total += more

    def lock_share(self) -> str:
        """The GPU lock's busy share of the wall time (each GPU's, with several): near 100% the GPU is the limit and
        more -j cannot help; well below it, compilation is, and more cores (or shards on more hosts) would."""
        held, wall = sum(self._held_s.values()), time.monotonic() - self.start
        if not held or not wall:
            return ""
        line = (f"GPU lock held {held:.0f} s of {wall:.0f} s ({held / wall:.0%}), "
                f"{held / len(self._held_s):.2f} s a cell")
        if len(self._gpu_held_s) > 1:
            line += "; per GPU: " + ", ".join(f"{gpu} {s:.0f} s ({s / wall:.0%})"
                                               for gpu, s in sorted(self._gpu_held_s.items()))
        return line


def _fmt(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


class _Workers:
    """The running worker processes, forked from one server (tracker.runner.forkserver), so an interrupt can end them
    all and record nothing half-done."""

    def __init__(self, server: ForkServer) -> None:
        self.stopping = threading.Event()
        self.server = server
        self._children: set[Child] = set()
        self._lock = threading.Lock()

    def run(self, argv: list[str], env: dict[str, str], timeout: float, stderr: Path) -> tuple[int | None, str]:
        """(exit status, the tail of its stderr); status None when it was killed at `timeout`."""
        child = self.server.launch("tracker.runner.worker", argv, env, REPO_ROOT, stderr)
        with self._lock:
            self._children.add(child)
        try:
            if not self.server.wait(child, timeout):
                self.server.kill(child)
                self.server.wait(child, 60)
                return None, stderr_tail(stderr)
            if child.status is None:  # its server exited first: a new one serves the next measurement
                return -1, stderr_tail(stderr) + "\nthe fork server exited while this measurement ran"
            return child.status, stderr_tail(stderr)
        finally:
            with self._lock:
                self._children.discard(child)

    def stop(self) -> None:
        self.stopping.set()
        with self._lock:
            for child in self._children:
                self.server.kill(child)


def cache_dirs(job: Job, cfg: RunConfig, tmp: str, kernels_dir: Path) -> tuple[str, str]:
    """(inductor's cache, Triton's cache) for one measurement. Inductor's (generated code, autotuning's choices) is
    the measurement's own, fresh unless `warm_cache_dir` keeps one per (torch, cell, replicate): every compile
    autotunes anew. Triton's (compiled binaries, the same whichever config autotuning picks) is shared by a cell's
    replicates, which start once its first is in: they skip recompiling what it compiled, and their compile is
    cheaper, not their choices. A replicate's own compile_s is therefore not cold; the cell's is its first's
    (tracker.store.cells.combine)."""
    c = job.cell
    if cfg.warm_cache_dir:
        cell_dir = cfg.warm_cache_dir / f"torch-{torch_version()}" / c.preset / c.workload / c.mode
        own = str(cell_dir) + ("" if job.replicate == 1 else f"@{job.replicate}")
        return os.path.join(own, "inductor"), str(cell_dir / "triton")
    return os.path.join(tmp, "inductor"), str(kernels_dir / c.preset / c.workload / c.mode)


def _run_one(job: Job, cfg: RunConfig, store: CellStore, workers: _Workers, kernels_dir: Path,
             slots: GpuSlots | None = None) -> dict[str, Any] | None:
    """Measure one replicate of a cell in a fresh process; None when the run is being interrupted (nothing
    recorded). `kernels_dir`: where this run keeps each cell's compiled Triton binaries (`cache_dirs`)."""
    if workers.stopping.is_set():
        return None
    cell = job.cell
    with tempfile.TemporaryDirectory(prefix="cb-cell-") as tmp:
        inductor, triton = cache_dirs(job, cfg, tmp, kernels_dir)
        argv = [cell.preset, cell.workload, cell.mode, str(job.replicate)]
        cost = expected_cost(cell)
        slot = slots.acquire(cost) if slots else None
        try:
            status, err = workers.run(argv, cfg.worker_env(cell, inductor, triton, slot), cfg.cell_timeout_s,
                                      Path(tmp) / "stderr.txt")
        finally:
            if slots and slot is not None:
                slots.release(slot, cost)
    if workers.stopping.is_set():
        return None
    why = (f"killed after the cell time limit of {cfg.cell_timeout_s:g} s" if status is None
           else (err.strip().splitlines() or [f"exit status {status}"])[-1])
    if status == EXIT_NOT_KEPT:  # measured, and lost: not a failure of the cell
        raise NotKept(f"{job} was measured but " + (why if why.startswith("not kept") else f"not kept in {store.dir}"))
    result = store.replicate(cell.preset, cell.workload, cell.mode, job.replicate)
    if result is None:  # the worker died before storing (crash, kill), or stored what no measurement gives
        unusable = store.unusable(cell.preset, cell.workload, cell.mode, job.replicate)
        result = {"preset": cell.preset, "workload": cell.workload, "mode": cell.mode, "device": cfg.device or "",
                  "status": FAILED, "samples_ms": [], "replicate": job.replicate,
                  "reason": f"its measurement is not usable: {unusable}" if unusable
                  else f"worker process failed: {why[:300]}"}
        try:
            store.put(result)
        except OSError as e:
            raise NotKept(f"{job} failed, and its failure was not kept in {store.dir}: {e.strerror or e}") from None
    return result


class NotKept(ToolError):
    """A measurement (or a failure) the cell store could not keep: a full disk, a read-only store. The run stops
    at once, exit 1: the cell is not failed, the tool failed, and what was stored before stays for the next run."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}; the run stopped, what was measured before is kept: free the space (or make the "
                         "store writable) and run again to resume")


def pending(cells: list[CellId], cfg: RunConfig, store: CellStore) -> list[Job]:
    """The measurements still to make as far as the store tells: each cell's first measurement, and the next further
    compile of a cell whose first measurement is stored and asks for more (`next_replicate`; the rest follow it);
    failed ones again with retry_failed. In queue order."""
    todo = [Job(c, rs[0]) for c in cells if (rs := _to_make(c, cfg, store))]
    order = {c: i for i, c in enumerate(queue_order(list(dict.fromkeys(j.cell for j in todo))))}
    return sorted(todo, key=lambda j: (order[j.cell], j.replicate))


def planned(cells: list[CellId], cfg: RunConfig, store: CellStore) -> int:
    """How many measurements the run will make if every first measurement works: `pending`'s, and the further
    compiles that follow them (`next_replicate`), so progress counts toward the whole run from its first line."""
    return sum(len(_to_make(c, cfg, store)) for c in cells)


def _to_make(c: CellId, cfg: RunConfig, store: CellStore) -> list[int]:
    """The replicates of `c` still to make, in order: its first measurement (a failed one again with retry_failed)
    and the further compiles after it; once its first is in, the further compiles it lacks; none after a failed
    first."""
    first = store.replicate(c.preset, c.workload, c.mode, 1)
    if first is None or _todo(first, cfg):
        return [1, *_lacking(c, cfg, store)]
    return _lacking(c, cfg, store) if first["status"] == "ok" else []


def _lacking(c: CellId, cfg: RunConfig, store: CellStore, after: int = 1) -> list[int]:
    """The cell's replicates after `after` that the store lacks, or whose measurement failed."""
    return [r for r in range(after + 1, cfg.replicates_of(c) + 1)
            if (stored := store.replicate(c.preset, c.workload, c.mode, r)) is None or stored["status"] == FAILED]


def _todo(stored: dict[str, Any] | None, cfg: RunConfig) -> bool:
    return stored is None or (cfg.retry_failed and stored["status"] == FAILED)


def next_replicate(job: Job, result: dict[str, Any], cfg: RunConfig, store: CellStore) -> list[Job]:
    """The cell's next further compile once `job` is done: the first replicate after it that the store lacks (or
    whose measurement failed), none when the cell's first measurement failed or none is lacking. A host-bound cell
    gets them too: its compiles can differ as much as a GPU-bound one's.

    One at a time: two compiles of one cell side by side hold twice its memory while they autotune, and the largest
    cells then run out of GPU memory and are measured again alone at the end (docs/runner.md has both cases). A
    further compile that failed is measured again by the next run: the cell's result is its first measurement's,
    and one further compile cut short (an interrupted run) must not leave the cell unconfirmed for good."""
    if job.replicate == 1 and result.get("status") != "ok":
        return []
    return [Job(job.cell, r) for r in _lacking(job.cell, cfg, store, after=job.replicate)[:1]]


def measure_cells(cells: list[CellId], cfg: RunConfig, store: CellStore, progress: Progress | None = None,
                  server: ForkServer | None = None) -> dict[CellId, dict[str, Any]]:
    """Make the measurements `store` lacks of `cells` (`pending`, then the further compiles each cell asks for);
    every cell's result, its replicates combined.

    A cell's next further compile goes to the front of the queue as soon as the one before it is in (`Queue`,
    `next_replicate`), so the run does not end on a tail of compile-heavy replicates. On KeyboardInterrupt the
    running workers are killed and nothing is recorded for their measurements, so the next run makes exactly the
    measurements that did not finish. `server`: the fork server to start them from, its caller's to close (one
    already started, say); by default one of its own, closed at the end."""
    done: dict[Job, dict[str, Any]] = {}
    store.dir.mkdir(parents=True, exist_ok=True)
    own_server = server is None
    workers = _Workers(server or ForkServer())
    slots = GpuSlots(len(cfg.gpus)) if cfg.gpus else None
    queue = Queue(pending(cells, cfg, store))
    pool = ThreadPoolExecutor(max_workers=max(1, cfg.jobs))
    kernels = tempfile.TemporaryDirectory(prefix="cb-kernels-")
    kernels_dir = Path(kernels.name)

    def submit(job: Job) -> Future[dict[str, Any] | None]:
        return pool.submit(_run_one, job, cfg, store, workers, kernels_dir, slots)

    try:
        futures: dict[Future[dict[str, Any] | None], Job] = {}
        while queue or futures:
            while queue and len(futures) < max(1, cfg.jobs):
                job = queue.pop()
                futures[submit(job)] = job
            finished, _ = wait(futures, return_when=FIRST_COMPLETED)
            for fut in finished:
                job = futures.pop(fut)
                result = fut.result()
                _finish(job, result, done, progress)
                extras = next_replicate(job, result, cfg, store) if result is not None else []
                if progress and job.replicate == 1 and result is not None and result.get("status") != "ok":
                    progress.expect(-len(_lacking(job.cell, cfg, store)))  # a failed first asks for none
                queue.push_front(extras)
                if not queue.holds(job.cell) and not any(j.cell == job.cell for j in futures.values()):
                    shutil.rmtree(kernels_dir / job.cell.preset / job.cell.workload / job.cell.mode,
                                  ignore_errors=True)
        if cfg.jobs > 1:
            for job in list(done):
                if needs_gpu_alone(done[job]):
                    store.remove(job.cell.preset, job.cell.workload, job.cell.mode, job.replicate)
                    _finish(job, _run_one(job, cfg, store, workers, kernels_dir, slots), done, progress)
    except BaseException:
        workers.stop()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if own_server:
            workers.server.close()
        kernels.cleanup()
    out = {}
    for c in cells:
        cell = store.get(c.preset, c.workload, c.mode)
        if cell is not None:
            out[c] = cell
    return out


class Queue:
    """The measurements waiting for a worker: the planned ones in queue order, and in front of them the further
    compiles that finished measurements asked for, oldest first. Those are the heaviest measurements
    (autotuned modes, each a full compile); left at the back they would all run last, with little else to keep the
    GPU busy beside them."""

    def __init__(self, planned: Iterable[Job]) -> None:
        self._front: deque[Job] = deque()
        self._planned: deque[Job] = deque(planned)

    def __bool__(self) -> bool:
        return bool(self._front or self._planned)

    def holds(self, cell: CellId) -> bool:
        return any(j.cell == cell for j in (*self._front, *self._planned))

    def push_front(self, jobs: Iterable[Job]) -> None:
        self._front.extend(jobs)

    def pop(self) -> Job:
        return (self._front or self._planned).popleft()


def needs_gpu_alone(result: dict[str, Any]) -> bool:
    """Other cells shared the GPU: a cell that ran out of memory, whose L2 flush had to be cut short for lack
    of free memory (so its timing may include host time), or whose samples spread as only a disturbed timing's
    do, gets a run of its own at the end."""
    return (result.get("reason", "").startswith("out of memory") or bool(result.get("flush_capped"))
            or stats.disturbed(result.get("median_ms"), result.get("p25_ms")))


def _finish(job: Job, result: dict[str, Any] | None, done: dict[Job, dict[str, Any]],
            progress: Progress | None) -> None:
    if result is not None:
        done[job] = result
        if progress:
            progress.cell_done(job, result)


class NothingMeasured(ToolError):
    """Every cell of a run was skipped (the presets need a GPU this host lacks, say): a run with nothing in it is
    not recorded, since it would stand as the latest run while holding no measurement."""


@dataclass
class RunOutcome:
    cells: dict[CellId, dict[str, Any]]
    results_file: Path | None
    wall_s: float

    def count(self, status: str) -> int:
        return sum(1 for c in self.cells.values() if c.get("status") == status)


def run_suite(cells: list[CellId], cfg: RunConfig, conf: Any, date_ms: int, out: TextIO | None = None) -> RunOutcome:
    """Measure `cells` (resuming from the store) and record them in asv's results for (machine, commit). What an
    interrupted `rm` left in the store is rolled back or finished first, so the run resumes from what it should.
    `out`: where progress goes (default: sys.stderr)."""
    start, out = time.monotonic(), out or sys.stderr
    for line in remove.finish_interrupted(conf.results_dir, cfg.store_root):
        print(line, file=out, flush=True)
    server = ForkServer()
    server.start_in_background()  # it imports while asv discovers the suite
    try:
        discovered = asvfiles.suite(conf, sys.executable, cfg.commit)  # before measuring: it can fail
        store = CellStore(cfg.store_root, RunKey(cfg.machine, cfg.commit, torch_version()))
        for path, why in store.damaged():
            print(f"warning: {path}: {why}; not used, its cell is measured again", file=out, flush=True)
        total = planned(cells, cfg, store)
        done = sum(store.replicate(c.preset, c.workload, c.mode) is not None for c in cells)
        counts = sorted(n for c in cells if (n := cfg.replicates_of(c)) > 1)
        each = "-".join(dict.fromkeys(map(str, counts[:1] + counts[-1:])))  # "3", or "4-6" for a confirmation
        print(f"{units.count(len(cells), 'cell')} ({done} already measured for this commit, machine and torch): "
              f"{units.count(total, 'measurement')} to make, {cfg.jobs} at a time"
              + (f"; {units.count(len(counts), 'cell gets', 'cells get')} {each} compiles each" if counts else ""),
              file=out, flush=True)
        progress = Progress(total, out)
        measured = measure_cells(cells, cfg, store, progress, server)
    finally:
        server.close()
    if cfg.jobs > 1 and (share := progress.lock_share()):
        print(share, file=out, flush=True)
    cell_list = list(measured.values())
    if cell_list and all(c.get("status") == "skipped" for c in cell_list):
        cells_were = "the one cell was" if len(cell_list) == 1 else f"all {len(cell_list)} cells were"
        raise NothingMeasured(f"{cells_were} skipped ({cell_list[0].get('reason')}): "
                              f"nothing was recorded in {conf.results_dir}; pick cells this host can measure (`list` "
                              "names the presets)")
    host = asvfiles.host_of(cell_list)
    if host is None:  # every cell was skipped: describe this host
        host = host_info(cfg.device).as_dict()
    results_file = asvfiles.record_run(conf, sys.executable, cfg.machine, cfg.commit, date_ms, cell_list, host,
                                       discovered=discovered)
    return RunOutcome(measured, results_file, time.monotonic() - start)
