"""What a worker process is given: its environment (the store, the GPU and its lock, the timing cores to keep off,
the compile threads) and its compile caches."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from tracker.measure import gpulock
from tracker.runner.config import RunConfig
from tracker.runner.plan import CellId, Job
from tracker.runner.worker import ENV_GPU, ENV_SETTINGS
from tracker.store.cells import ENV_MACHINE, ENV_ROOT, torch_version


def usable_cpus() -> list[int]:
    """The cores this process may run on: a shard started under `taskset` (one per GPU of a host) counts only
    its own, so shards do not reserve the same timing cores or oversubscribe the compilers."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def timing_cpus(cfg: RunConfig, slot: int = 0) -> list[int]:
    """Two cores for the process that holds a GPU's lock (the `slot`-th GPU's), when cells run in parallel and at
    least four cores are left to compile on."""
    cpus, n = usable_cpus(), max(1, len(cfg.gpus))
    return cpus[2 * slot:2 * slot + 2] if cfg.jobs > 1 and len(cpus) >= 2 * n + 4 else []


def worker_env(cfg: RunConfig, cell: CellId, inductor_cache: str, triton_cache: str,
               slot: int | None = None) -> dict[str, str]:
    """The environment of a worker measuring `cell` with these compile caches; `slot`: its GPU's position in
    `cfg.gpus`."""
    env = dict(os.environ)
    timing = timing_cpus(cfg, slot or 0)
    compile_cores = len(usable_cpus()) - len(timing) * max(1, len(cfg.gpus))
    lock = ".gpu.lock"
    if slot is not None:
        gpu = cfg.gpus[slot]
        lock = f".gpu-{''.join(c if c.isalnum() else '_' for c in gpu)}.lock"
        env.update({"CUDA_VISIBLE_DEVICES": gpu, ENV_GPU: gpu,
                    gpulock.ENV_RESERVED_CPUS: ",".join(str(c) for k in range(len(cfg.gpus))
                                                        for c in timing_cpus(cfg, k))})
    env.update({
        ENV_ROOT: str(cfg.store_root),
        ENV_MACHINE: cfg.machine,
        "ASV_COMMIT": cfg.commit,
        ENV_SETTINGS: json.dumps(asdict(cfg.settings_of(cell))),
        gpulock.ENV_LOCK: str(cfg.store_root / lock),
        gpulock.ENV_TIMING_CPUS: ",".join(map(str, timing)),
        # Share the other cores among the compiling workers.
        "TORCHINDUCTOR_COMPILE_THREADS": str(max(1, compile_cores // max(1, cfg.jobs))),
        "TORCHINDUCTOR_CACHE_DIR": inductor_cache,
        "TRITON_CACHE_DIR": triton_cache,
        "PYTHONUNBUFFERED": "1",
    })
    if cfg.device:
        env["COMPILE_BASELINES_DEVICE"] = cfg.device
    return env


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

