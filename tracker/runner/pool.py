"""Run a set of cells: `jobs` measurements at a time, each a fresh compile, GPU timing serialized by a lock per GPU.

Each process is forked from a server that has imported torch and the compiler once (tracker.runner.forkserver); a
cell's first measurement has a fresh one, and a process done with its measurement may stay for further compiles of
other cells (tracker.runner.resident).
Workers overlap their CPU-bound parts (tracing, inductor and Triton compilation); every GPU timing (ours and
autotuning's) holds its GPU's cross-process lock (tracker.measure.gpulock). With several GPUs (`gpus`) each
measurement runs on the one the scheduler chose (tracker.runner.schedule), the workers shared. Finished cells land in
the cell store at once, so an interrupted run resumes where it stopped."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from tracker import stats
from tracker.errors import ToolError
from tracker.measure.cellresult import FAILED, CellResult
from tracker.paths import REPO_ROOT
from tracker.runner.config import RunConfig
from tracker.runner.costs import Costs
from tracker.runner.forkserver import ForkServer, stderr_tail
from tracker.runner.plan import CellId, Job
from tracker.runner.progress import Progress
from tracker.runner.remaining import lacking, next_replicate, pending, to_make, waits_for_first
from tracker.runner.resident import Request, Resident, may_take
from tracker.runner.schedule import Scheduler, Start
from tracker.runner.worker import EXIT_NOT_KEPT
from tracker.runner.workerenv import cache_dirs, worker_env
from tracker.store.cells import CellStore
from workloads.modes import COMPILED

# Processes of a GPU that may wait, done with a measurement, for a further compile of another cell: each holds its CUDA
# context, in the share of the GPU's memory the reservations leave free (policy.MEMORY_SHARE).
SPARE = 2


class _Workers:
    """The worker processes, forked from one server (tracker.runner.forkserver), so an interrupt can end them all and
    record nothing half-done; with `stay`, each may stay for further compiles (tracker.runner.resident), SPARE a GPU
    at most waiting for one beside those the scheduler runs."""

    def __init__(self, server: ForkServer, stay: bool = False) -> None:
        self.stopping = threading.Event()
        self.server, self.stay = server, stay
        self._running: set[Resident] = set()
        self._idle: list[Resident] = []
        self._lock = threading.Lock()

    def run(self, job: Job, gpu: int | None, argv: list[str], env: dict[str, str], timeout: float,
            stderr: Path) -> tuple[int | None, str]:
        """(exit status, the tail of its stderr); status None when it was killed at `timeout`."""
        worker = self._reuse(job, gpu, Request(argv, env, str(stderr))) or self._launch(job, gpu, argv, env, stderr)
        worker.measured.add(job.cell)
        try:
            return self._outcome(worker, timeout, stderr)
        finally:
            with self._lock:
                self._running.discard(worker)

    def _reuse(self, job: Job, gpu: int | None, request: Request) -> Resident | None:
        with self._lock:
            for worker in self._idle:
                if worker.gpu == gpu and may_take(job, worker.measured):
                    self._idle.remove(worker)
                    self._running.add(worker)
                    break
            else:
                return None
        if worker.send(request):
            return worker
        with self._lock:
            self._running.discard(worker)
        worker.close()
        return None

    def _launch(self, job: Job, gpu: int | None, argv: list[str], env: dict[str, str], stderr: Path) -> Resident:
        worker = Resident(gpu, listening=self.stay)
        with self._lock:
            self._running.add(worker)
        # a measurement that compiles nothing starts before the server has imported the compiler (the ramp's)
        worker.child = self.server.launch("tracker.runner.worker", argv, {**env, **worker.env()}, REPO_ROOT, stderr,
                                          preloaded=job.cell.mode in COMPILED)
        return worker

    def _outcome(self, worker: Resident, timeout: float, stderr: Path) -> tuple[int | None, str]:
        child = worker.child
        assert child is not None  # launched, or handed over once launched
        if worker.listening:
            report, timed_out = worker.report(timeout, child.exited.is_set)
        else:
            report, timed_out = None, not self.server.wait(child, timeout)
        if timed_out:
            self.server.kill(child)
            self.server.wait(child, 60)
            worker.close()
            return None, stderr_tail(stderr)
        if report is None:  # it exited without a report (a crash, or it was never to stay)
            worker.close()
            self.server.wait(child, 60)
            if child.status is None:  # its server exited first: a new one serves the next measurement
                return -1, stderr_tail(stderr) + "\nthe fork server exited while this measurement ran"
            return child.status, stderr_tail(stderr)
        with self._lock:
            retired = [worker]
            if report.get("stays") and not self.stopping.is_set():
                self._idle.append(worker)
                waiting = [w for w in self._idle if w.gpu == worker.gpu]
                retired = waiting[:max(0, len(waiting) - SPARE)]  # those that have waited longest
                for w in retired:
                    self._idle.remove(w)
        for w in retired:
            w.close()
        return int(report.get("status", 1)), stderr_tail(stderr)

    def release(self) -> None:
        """The processes waiting for a further compile told to exit (no more stay from here)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()

    def stop(self) -> None:
        self.stopping.set()
        with self._lock:
            workers = [*self._running, *self._idle]
            self._idle = []
        for worker in workers:
            if worker.child is not None:
                self.server.kill(worker.child)
            worker.close()


def _run_one(start: Start, cfg: RunConfig, store: CellStore, workers: _Workers,
             kernels_dir: Path) -> CellResult | None:
    """Make one measurement (a replicate of a cell) in a fresh process, on the GPU the scheduler chose; None when the
    run is being interrupted (nothing recorded). `kernels_dir`: where this run keeps each cell's compiled Triton
    binaries (`cache_dirs`)."""
    if workers.stopping.is_set():
        return None
    job, cell = start.job, start.job.cell
    with tempfile.TemporaryDirectory(prefix="cb-cell-") as tmp:
        inductor, triton = cache_dirs(job, cfg, tmp, kernels_dir)
        argv = [cell.preset, cell.workload, cell.mode, str(job.replicate)]
        env = worker_env(cfg, cell, inductor, triton, start.gpu, start.reserve_bytes)
        status, err = workers.run(job, start.gpu, argv, env, cfg.cell_timeout_s, Path(tmp) / "stderr.txt")
    if workers.stopping.is_set():
        return None
    why = (f"killed after the cell time limit of {cfg.cell_timeout_s:g} s" if status is None
           else (err.strip().splitlines() or [f"exit status {status}"])[-1])
    if status == EXIT_NOT_KEPT:  # measured, and lost: not a failure of the cell
        raise NotKept(f"{job} was measured but " + (why if why.startswith("not kept") else f"not kept in {store.dir}"))
    result = store.replicate(cell.preset, cell.workload, cell.mode, job.replicate)
    if result is None:  # the worker died before storing (crash, kill), or stored what no measurement gives
        unusable = store.unusable(cell.preset, cell.workload, cell.mode, job.replicate)
        result = CellResult(cell.preset, cell.workload, cell.mode, cfg.device or "", FAILED,
                            reason=f"its measurement is not usable: {unusable}" if unusable
                            else f"worker process failed: {why[:300]}", replicate=job.replicate,
                            json_keys=NOT_STORED_KEYS)
        try:
            store.put(result)
        except OSError as e:
            raise NotKept(f"{job} failed, and its failure was not kept in {store.dir}: {e.strerror or e}") from None
    return result


# The keys of the failure recorded for a measurement its worker did not store, in the order runs have written them.
NOT_STORED_KEYS = ("preset", "workload", "mode", "device", "status", "samples_ms", "replicate", "reason")


class NotKept(ToolError):
    """A measurement (or a failure) the cell store could not keep: a full disk, a read-only store. The run stops
    at once, exit 1: the cell is not failed, the tool failed, and what was stored before stays for the next run."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}; the run stopped, what was measured before is kept: free the space (or make the "
                         "store writable) and run again to resume")


def measure_cells(cells: list[CellId], cfg: RunConfig, store: CellStore, progress: Progress | None = None,
                  server: ForkServer | None = None, check: Callable[[], None] | None = None
                  ) -> dict[CellId, CellResult]:
    """Make the measurements `store` lacks of `cells` (`pending`, then the further compiles each cell asks for);
    every cell's result, its replicates combined.

    The scheduler (tracker.runner.schedule) says which measurement starts next and on which GPU, from what each is
    expected to cost (tracker.runner.costs: what the store's root recorded of its cell before); a cell's further
    compiles start as soon as the one before them is in (`next_replicate`). A further compile whose timing was
    disturbed is measured again at once (`_Loop._again_at_once`); what shared its GPU short of memory, or was
    disturbed still, is measured again alone at the end (`needs_gpu_alone`). On KeyboardInterrupt the running workers
    are killed and nothing is recorded for their measurements, so the next run makes exactly the measurements that
    did not finish. `server`: the fork server to start them from, its caller's to close (one already started, say);
    by default one of its own, closed at the end. `check`: called every second while measuring; what it raises stops
    the run as an interrupt does (what the caller does beside, failing)."""
    done: dict[Job, CellResult] = {}
    store.dir.mkdir(parents=True, exist_ok=True)
    own_server = server is None
    making = {c: to_make(c, cfg, store) for c in cells}
    # a process stays only for further compiles: a run of first measurements alone ends each at once
    workers = _Workers(server or ForkServer(), cfg.stay and any(r > 1 for rs in making.values() for r in rs))
    costs = Costs.from_store_root(cfg.store_root)
    schedule = Scheduler(pending(cells, cfg, store), costs, len(cfg.gpus), cfg.jobs, cfg.planned_memory,
                         {c: len(rs) for c, rs in making.items()}, cfg.together)
    pool = ThreadPoolExecutor(max_workers=max(1, cfg.jobs))
    kernels = tempfile.TemporaryDirectory(prefix="cb-kernels-")
    run = _Loop(cfg, store, workers, Path(kernels.name), pool, done, costs, progress, check)
    try:
        run.drain(schedule, further=True)
        if cfg.jobs > 1:
            workers.release()
            workers.stay = False  # alone on its GPU: no process of the run waits beside it
            again = [job for job in done if needs_gpu_alone(done[job])]
            for job in again:
                store.remove(job.cell.preset, job.cell.workload, job.cell.mode, job.replicate)
            run.drain(Scheduler(again, costs, len(cfg.gpus), len(cfg.gpus) or 1, cfg.memory_budget, alone=True))
    except BaseException:
        workers.stop()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        workers.release()
        if own_server:
            workers.server.close()
        kernels.cleanup()
    out = {}
    for c in cells:
        cell = store.get(c.preset, c.workload, c.mode)
        if cell is not None:
            out[c] = cell
    return out


@dataclass
class _Loop:
    """Starts what the scheduler says, as workers come free, until it has nothing left."""

    cfg: RunConfig
    store: CellStore
    workers: _Workers
    kernels_dir: Path
    pool: ThreadPoolExecutor
    done: dict[Job, CellResult]
    costs: Costs  # the scheduler's: what each measurement of the run records, its cell's next ones reserve
    progress: Progress | None
    check: Callable[[], None] | None = None
    retried: set[Job] = field(default_factory=set)  # further compiles measured again at once, once each

    def drain(self, schedule: Scheduler, further: bool = False) -> None:
        """Run `schedule`'s measurements; with `further`, each cell's further compiles as they are asked for."""
        futures: dict[Future[CellResult | None], Start] = {}
        while schedule or futures:
            while len(futures) < max(1, self.cfg.jobs) and (start := schedule.start()) is not None:
                futures[self.pool.submit(_run_one, start, self.cfg, self.store, self.workers, self.kernels_dir)] = start
            if not futures:
                raise RuntimeError("the scheduler holds measurements but starts none with nothing running")
            finished, _ = wait(futures, timeout=1.0 if self.check else None, return_when=FIRST_COMPLETED)
            if self.check:
                self.check()
            for fut in finished:
                start = futures.pop(fut)
                schedule.finished(start)
                self._finished(start.job, fut.result(), schedule if further else None)
                cell = start.job.cell
                if not schedule.holds(cell) and not any(s.job.cell == cell for s in futures.values()):
                    shutil.rmtree(self.kernels_dir / cell.preset / cell.workload / cell.mode, ignore_errors=True)

    def _finished(self, job: Job, result: CellResult | None, schedule: Scheduler | None) -> None:
        if result is None:
            return
        self.done[job] = result
        self.costs.learn(result)
        if self.progress:
            self.progress.cell_done(job, result)
        if schedule is None:
            return
        if self._again_at_once(job, result, schedule):
            return
        if self.progress and job.replicate == 1 and not result.ok and waits_for_first(job.cell):
            self.progress.expect(-len(lacking(job.cell, self.cfg, self.store)))  # a failed first asks for none
        schedule.add(next_replicate(job, result, self.cfg, self.store))

    def _again_at_once(self, job: Job, result: CellResult, schedule: Scheduler) -> bool:
        """A further compile whose timing was disturbed is measured again at once beside the others, not alone at the
        end, where its compile would run with nothing beside it; the cell's next compile is asked for once it is in.
        A first compile waits for the end (its compile time is the cell's, and its cell's Triton binaries would make
        the one again warm), as does one disturbed twice."""
        disturbed = result.ok and stats.disturbed(result.median_ms, result.p25_ms)
        if job.replicate == 1 or job in self.retried or not disturbed:
            return False
        self.retried.add(job)
        self.store.remove(job.cell.preset, job.cell.workload, job.cell.mode, job.replicate)
        if self.progress:
            self.progress.expect(1)
        schedule.add([job])
        return True


def needs_gpu_alone(result: CellResult) -> bool:
    """Other cells shared the GPU: a cell that ran out of memory, whose L2 flush had to be cut short for lack
    of free memory (so its timing may include host time), or whose samples spread as only a disturbed timing's
    do, gets a run of its own at the end."""
    return (result.reason.startswith("out of memory") or bool(result.flush_capped)
            or stats.disturbed(result.median_ms, result.p25_ms))
