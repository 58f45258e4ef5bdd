"""What a run does where the command line leaves it open: which device, which presets, how many cells at once."""

from __future__ import annotations

import os

from tracker.errors import UsageError
from tracker.measure import gpulock
from tracker.measure.hostinfo import cuda_available, cuda_build
from tracker.runner import gpus
from tracker.runner.workerenv import usable_cpus
from workloads import catalog

# `pr`'s wall time for measuring (tracker.flows.rounds.Budget): with its worktrees and comment, a PR of one module of
# workloads within five minutes on one GPU (docs/verdicts.md)
PR_BUDGET_S = 280.0


def device(requested: str | None) -> str:
    """The device asked for, else CUDA where this host has it, else the CPU."""
    return requested or ("cuda" if cuda_available() else "cpu")


def default_presets(device: str) -> list[str]:
    """The study's shapes on a GPU; on a CPU only the tiny one, which a CPU measures in reasonable time. A plugin's
    presets join them likewise: those that need CUDA on a GPU, the others (its tiny ones) on a CPU."""
    study = ["prefill", "decode"] if device == "cuda" else ["tiny"]
    plugins = [p.name for w in catalog.plugin_workloads() for p in w.presets if p.needs_cuda == (device == "cuda")]
    return list(dict.fromkeys([*study, *plugins]))


# The most measuring processes a host runs at once, whatever its GPUs: CUDA's start in each slows with the number of
# processes in flight host-wide, not per GPU (docs/runner.md, "CUDA's start").
HOST_JOBS = 32


def default_jobs(device: str, gpus: int = 1, cores: int | None = None) -> int:
    """Cells at once. On a GPU host one per usable core, up to 16 a GPU and HOST_JOBS in all: a cell is mostly CPU
    work (start-up, tracing, compiling, loading caches) around a short GPU timing that its GPU's lock serializes, so
    more workers keep the GPUs busy until the cores run out; 16 is the most that has been measured to help one GPU,
    32 beat 64 on four (docs/runner.md). On a CPU host one, since the timing itself runs on the cores that compiling
    would take. `cores`: of another host (a simulation's), else this process's usable ones."""
    if device != "cuda":
        return 1
    return max(1, min(16 * max(1, gpus), HOST_JOBS, len(usable_cpus()) if cores is None else cores))


def default_jobs_here(listed: tuple[str, ...] | None = None) -> int:
    """`default_jobs` of a run on this host with every GPU visible (what `pr` gives both sides together), told without
    importing torch (two seconds at the start of every `pr`): a CUDA build of torch, and the GPUs nvidia-smi lists
    (`listed`, when the caller has asked it already: gpus.listed)."""
    here = (gpus.listed() if listed is None else listed) if cuda_build() else ()
    return default_jobs("cuda", len(here)) if here else default_jobs("cpu")


# The share of each GPU's memory that the measurements on it may reserve together (tracker.runner.memledger): the
# rest stays free for what the reservations do not count (fragmentation, the driver's own).
MEMORY_SHARE = 0.9


def memory_budget(picked: tuple[str, ...]) -> int | None:
    """Each GPU's memory for the measurements on it, as nvidia-smi reports the least of `picked`; None without it."""
    total = gpus.memory_bytes(picked, gpus.nvidia_smi(command=gpus.NVIDIA_SMI_MEMORY))
    return None if total is None else int(total * MEMORY_SHARE)


# Runs measuring on the same GPUs at once, this one included: set by the flow that starts them side by side
# (tracker.flows.rounds, a PR round's two sides); unset, one.
ENV_RUNS_PER_GPU = "COMPILE_BASELINES_RUNS_PER_GPU"


def runs_per_gpu() -> int:
    """The runs that share this run's GPUs at once (ENV_RUNS_PER_GPU). Each plans within an equal share of every GPU's
    memory, so that what they reserve together fits: a run planning within the whole budget would keep the other's
    measurements waiting in the ledger behind its largest, and its compiles of a pair a whole compile apart from the
    other side's (docs/runner.md)."""
    value = os.environ.get(ENV_RUNS_PER_GPU, "").strip()
    if not value:
        return 1
    if not value.isdigit() or int(value) < 1:
        raise UsageError(f"{ENV_RUNS_PER_GPU}={value!r}: the number of runs sharing the GPUs, a whole number from 1")
    return int(value)


def autotune_settle() -> tuple[float, float]:
    """The settle of autotuning's choices after another process's hold of the GPU lock, and the shortest such hold
    it follows, in seconds (tracker.measure.gpulock.ENV_SETTLE_MS, ENV_SETTLE_AFTER_MS; 0, the default: no settle,
    after any hold), checked here so that a bad value is one error before anything is measured rather than one in
    every worker."""
    try:
        return gpulock.settle_from_env()
    except ValueError as e:
        raise UsageError(str(e)) from None


def default_together(device: str) -> int:
    """A cell's further compiles at once on a GPU: two. They start once its first is in, and one after another the
    longest cell's chain is what a run on several GPUs ends waiting for (docs/runner.md has the simulation's
    figures); the scheduler keeps them within the GPU's memory. On a CPU one: the cores the timing runs on are the
    compilers'."""
    return 2 if device == "cuda" else 1


RUN_REP_MS = 500.0


def default_rep_ms() -> float:
    """do_bench's measurement budget for each cell of a run: half the study's 1000 ms. What decides a verdict is what
    differs between compiles and processes, far more than the within-process median's precision, and the GPU lock
    is the cold full suite's bottleneck: half the budget saves GPU time and loses no precision a verdict needs
    (docs/runner.md). `measure` (one cell) keeps the study's budget."""
    return RUN_REP_MS


def default_replicates(device: str) -> int:
    """Compiles per cell of the autotuned modes. On a GPU three: their compiles choose different kernels and launch
    configs (docs/runner.md), and three give the best, the median and the spread. On a CPU one: inductor's CPU
    backend benchmarks no candidates, and the tiny preset is a smoke run."""
    return 3 if device == "cuda" else 1
