"""One cell in one process of its own: `main([PRESET, WORKLOAD, MODE, REPLICATE])` in a child the runner's fork server
starts (or `python -m tracker.runner.worker PRESET WORKLOAD MODE [REPLICATE]`); REPLICATE (1, 2, ...) says which of
the cell's measurements this is (default 1).

MODE is a compile mode or `kernel:NAME`, a registered candidate of WORKLOAD (measure_cell resolves it).

Measures with the cross-process GPU lock when the runner set one, and stores the result atomically in
the cell store of this run (COMPILE_BASELINES_CELLS, ASV_COMMIT, COMPILE_BASELINES_MACHINE). The first cell
to finish records the host's launch floor there; later cells of the run reuse it instead of measuring it."""

from __future__ import annotations

import contextlib
import json
import os
import sys

from tracker.measure import gpulock
from tracker.measure.harness import Settings, measure_cell
from tracker.store import atomic
from tracker.store.cells import CellStore, RunKey, default_root, stored_form

ENV_SETTINGS = "COMPILE_BASELINES_SETTINGS"  # JSON of measure.Settings fields
# The exit status of a worker that measured its cell but could not store it (a full disk, a read-only store):
# sysexits' EX_IOERR. The runner stops there (tracker.runner.pool.NotKept) rather than call the cell failed.
EXIT_NOT_KEPT = 74
ENV_GPU = "COMPILE_BASELINES_GPU"  # the GPU this worker measures on, as CUDA_VISIBLE_DEVICES names it
GPU_INDEX = "gpu_index"  # where a measurement records it ("gpu" in results and host info is the GPU's model)


def main(argv: list[str]) -> int:
    preset, workload, mode, *rest = argv
    replicate = int(rest[0]) if rest else 1
    settings = Settings(**json.loads(os.environ.get(ENV_SETTINGS) or "{}"))
    lock = gpulock.from_env()
    exclusive = contextlib.nullcontext
    if lock is not None:
        gpulock.keep_off_timing_cpus(gpulock.reserved_cpus(lock))
        gpulock.install(lock)
        exclusive = lock.held
    store = CellStore(default_root(), RunKey.from_env())
    floor = store.launch_floor()
    cell = measure_cell(preset, workload, mode, device=os.environ.get("COMPILE_BASELINES_DEVICE") or None,
                        settings=settings, exclusive=exclusive, launch_us=floor)
    if lock is not None:
        cell.lock_held_s, cell.lock_wait_s = round(lock.held_s, 4), round(lock.wait_s, 4)
    gpu = {GPU_INDEX: os.environ[ENV_GPU]} if os.environ.get(ENV_GPU) else {}
    try:
        store.put({**stored_form(cell.as_dict()), "replicate": replicate, **gpu})
        if floor is None and cell.launch_us is not None:
            store.set_launch_floor(cell.launch_us)
    except (OSError, atomic.LockError) as e:  # the last line of stderr: what the runner says
        print(f"not kept in {store.dir}: {getattr(e, 'strerror', None) or e}", file=sys.stderr)
        return EXIT_NOT_KEPT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
