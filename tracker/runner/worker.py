"""A measurement in a worker process: `main([PRESET, WORKLOAD, MODE, REPLICATE])` in a child the runner's fork server
starts (or `python -m tracker.runner.worker PRESET WORKLOAD MODE [REPLICATE]`); REPLICATE (1, 2, ...) says which of
the cell's measurements this is (default 1). Where the runner lets it stay, the process then makes the further
compiles it is handed (tracker.runner.resident), each recording its place among them (`process_turn`).

MODE is a compile mode or `kernel:NAME`, a registered candidate of WORKLOAD (measure_cell resolves it).

Measures with the cross-process GPU lock when the runner set one, after a turn to create its CUDA context
(tracker.measure.cudainit) and holding its share of the GPU's memory (tracker.runner.memledger) where the runner set
them, and stores the result atomically in the cell store of this run (COMPILE_BASELINES_CELLS, ASV_COMMIT,
COMPILE_BASELINES_MACHINE), with when it ran (`_when`). The first cell to finish records the host's launch floor
there; later cells of the run reuse it instead of measuring it."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import replace

from tracker.measure import cudainit, fresh, gpulock
from tracker.measure.harness import CellResult, Settings, measure_cell
from tracker.runner import memledger, resident
from tracker.runner.workerenv import ENV_GPU, ENV_LAUNCHED, ENV_RUN, ENV_SETTINGS
from tracker.store import atomic
from tracker.store.cells import CellStore, RunKey, default_root, stored_form
from workloads.modes import COMPILED

# The exit status of a worker that measured its cell but could not store it (a full disk, a read-only store):
# sysexits' EX_IOERR. The runner stops there (tracker.runner.pool.NotKept) rather than call the cell failed.
EXIT_NOT_KEPT = 74
GPU_INDEX = "gpu_index"  # where a measurement records it ("gpu" in results and host info is the GPU's model)


def main(argv: list[str]) -> int:
    """Measure the cell `argv` names; where the runner lets this process stay (tracker.runner.resident), then each
    further compile it is handed, its compiler state cleared in between, until it is told no more or is unfit."""
    status, turn, channel = _measure(argv, 1), 1, None
    while True:
        channel = channel or resident.Channel.from_env()
        if channel is None:
            return status
        stays = status == 0 and _fit_for_another()
        channel.report(status, stays)
        request = channel.next() if stays else None
        if request is None:
            return status
        resident.take(request)
        turn += 1
        status = _measure(request.argv, turn)


def _fit_for_another() -> bool:
    """This process cleared for another measurement, and fit for it (a CUDA error that outlived the last one: not)."""
    try:
        return fresh.fit_for_another(fresh.clear())
    except Exception:
        return False


_LOCK: gpulock.GpuLock | None = None  # this process's hold on its GPU's lock, installed once


def _gpu_lock(compiler: bool) -> gpulock.GpuLock | None:
    """The GPU lock the runner set, installed where the process times (again for a compiled cell after an eager one);
    its counts restarted for this measurement."""
    global _LOCK
    if _LOCK is None:
        _LOCK = gpulock.from_env()
        if _LOCK is None:
            return None
        gpulock.keep_off_timing_cpus(gpulock.reserved_cpus(_LOCK))
    gpulock.install(_LOCK, compiler=compiler)
    _LOCK.restart()
    return _LOCK


def _measure(argv: list[str], turn: int) -> int:
    preset, workload, mode, *rest = argv
    replicate = int(rest[0]) if rest else 1
    settings = Settings(**json.loads(os.environ.get(ENV_SETTINGS) or "{}"))
    lock = _gpu_lock(compiler=mode in COMPILED)
    exclusive = lock.held if lock is not None else contextlib.nullcontext
    gate = cudainit.from_env() if turn == 1 else None  # a later measurement's context is made
    memory = memledger.from_env()
    store = CellStore(default_root(), RunKey.from_env())
    floor = store.launch_floor()
    with memory[0].reserved(memory[1]) if memory else contextlib.nullcontext(None) as memory_wait_s:
        cell = measure_cell(preset, workload, mode, device=os.environ.get("COMPILE_BASELINES_DEVICE") or None,
                            settings=settings, exclusive=exclusive, launch_us=floor,
                            cuda_init_gate=gate.held if gate else contextlib.nullcontext, shared_floor=store)
    try:
        stored = replace(stored_form(cell), replicate=replicate, process_turn=turn if turn > 1 else None)
        store.put(_when(stored, lock, memory_wait_s))
        if floor is None and cell.launch_us is not None:
            store.set_launch_floor(cell.launch_us)
    except (OSError, atomic.LockError) as e:  # the last line of stderr: what the runner says
        print(f"not kept in {store.dir}: {getattr(e, 'strerror', None) or e}", file=sys.stderr)
        return EXIT_NOT_KEPT
    return 0


def _when(cell: CellResult, lock: gpulock.GpuLock | None, memory_wait_s: float | None) -> CellResult:
    """The cell with what the runner's timeline reads beside it (tools/bench_runner.py phases): its GPU, when it was
    asked for and ended, its holds of the GPU lock and its waits for the lock and for memory."""
    cell.ended_at = round(time.time(), 3)
    cell.run_id = os.environ.get(ENV_RUN) or None
    if os.environ.get(ENV_GPU):
        cell.gpu_index = os.environ[ENV_GPU]
    if os.environ.get(ENV_LAUNCHED):
        cell.launched_at = float(os.environ[ENV_LAUNCHED])
    if lock is not None:
        cell.lock_held_s, cell.lock_wait_s = round(lock.held_s, 4), round(lock.wait_s, 4)
        if cell.started_at is not None:
            cell.lock_spans = lock.spans_after(cell.started_at)
        if lock.settle_s > 0:
            cell.lock_settled_s = round(lock.settled_s, 4)
    if memory_wait_s is not None:
        cell.memory_wait_s = round(memory_wait_s, 4)
    return cell


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
