"""What a worker process is given: its environment (the store, the GPU and its lock, the timing cores to keep off,
the compile threads) and its compile caches."""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import asdict
from pathlib import Path

from tracker.measure import cudainit, gpulock
from tracker.runner import memledger
from tracker.runner.config import RunConfig
from tracker.runner.gpus import file_key
from tracker.runner.plan import CellId, Job
from tracker.store.cells import ENV_MACHINE, ENV_ROOT, torch_version

# What a worker (tracker.runner.worker) reads of its environment beside the store's and the lock's
ENV_SETTINGS = "COMPILE_BASELINES_SETTINGS"  # JSON of measure.Settings fields
ENV_GPU = "COMPILE_BASELINES_GPU"  # the GPU this worker measures on, as CUDA_VISIBLE_DEVICES names it
ENV_RUN = "COMPILE_BASELINES_RUN_ID"  # the run this worker measures for (CellResult.run_id)
RUN_ID = uuid.uuid4().hex[:12]  # this runner process's
ENV_LAUNCHED = "COMPILE_BASELINES_LAUNCHED_AT"  # when the runner asked for this process (seconds since the epoch)


def usable_cpus() -> list[int]:
    """The cores this process may run on: a shard started under `taskset` (one per GPU of a host) counts only
    its own, so shards do not reserve the same timing cores or oversubscribe the compilers."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def cpu_groups(n: int, cpus: list[int] | None = None) -> list[list[int]]:
    """This process's usable cores (or `cpus`) in `n` disjoint groups of consecutive cores, as even as they divide
    (the first groups one more). A `run` started on each group (under `taskset -c`, or with its affinity set) takes its
    timing cores and compile threads from its own (`timing_cpus`, `usable_cpus`), so runs on different GPUs never
    share a core."""
    cpus = usable_cpus() if cpus is None else sorted(cpus)
    if not 1 <= n <= len(cpus):
        raise ValueError(f"{len(cpus)} cores cannot make {n} groups")
    size, extra = divmod(len(cpus), n)
    bounds = [k * size + min(k, extra) for k in range(n + 1)]
    return [cpus[bounds[k]:bounds[k + 1]] for k in range(n)]


def timing_cpus(cfg: RunConfig, slot: int = 0) -> list[int]:
    """Two cores for the process that holds a GPU's lock (the `slot`-th GPU's), when cells run in parallel and at
    least four cores are left to compile on."""
    cpus, n = usable_cpus(), max(1, len(cfg.gpus))
    return cpus[2 * slot:2 * slot + 2] if cfg.jobs > 1 and len(cpus) >= 2 * n + 4 else []


def worker_env(cfg: RunConfig, cell: CellId, inductor_cache: str, triton_cache: str,
               slot: int | None = None, reserve_bytes: int = 0) -> dict[str, str]:
    """The environment of a worker measuring `cell` with these compile caches; `slot`: its GPU's position in
    `cfg.gpus`, where it takes a turn to create its CUDA context (`cfg.cuda_inits` at once) and reserves
    `reserve_bytes` of the memory (when the GPU's budget is known). Each GPU's lock, init turns and ledger are files
    in the store's root named by the GPU, so every run measuring on it shares them."""
    env = dict(os.environ)
    timing = timing_cpus(cfg, slot or 0)
    compile_cores = len(usable_cpus()) - len(timing) * max(1, len(cfg.gpus))
    lock = ".gpu.lock"
    if slot is not None:
        gpu = cfg.gpus[slot]
        lock = f".gpu-{file_key(gpu)}.lock"
        env.update({"CUDA_VISIBLE_DEVICES": gpu, ENV_GPU: gpu,
                    gpulock.ENV_RESERVED_CPUS: ",".join(str(c) for k in range(len(cfg.gpus))
                                                        for c in timing_cpus(cfg, k))})
        if cfg.cuda_inits > 0:
            env[cudainit.ENV_GATE] = cudainit.spec(str(cfg.store_root / f".gpu-{file_key(gpu)}.init"),
                                                   cfg.cuda_inits)
        if cfg.memory_budget is not None:
            env.update({memledger.ENV_LEDGER: str(memledger.ledger_path(cfg.store_root, gpu)),
                        memledger.ENV_BUDGET: str(cfg.memory_budget), memledger.ENV_RESERVE: str(reserve_bytes)})
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
        ENV_LAUNCHED: f"{time.time():.3f}",
        ENV_RUN: RUN_ID,
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

