"""What a run does where the command line leaves it open: which device, which presets, how many cells at once."""

from __future__ import annotations

from tracker.measure.hostinfo import cuda_available
from tracker.runner.pool import usable_cpus
from workloads import catalog


def device(requested: str | None) -> str:
    """The device asked for, else CUDA where this host has it, else the CPU."""
    return requested or ("cuda" if cuda_available() else "cpu")


def default_presets(device: str) -> list[str]:
    """The study's shapes on a GPU; on a CPU only the tiny one, which a CPU measures in reasonable time. A plugin's
    presets join them likewise: those that need CUDA on a GPU, the others (its tiny ones) on a CPU."""
    study = ["prefill", "decode"] if device == "cuda" else ["tiny"]
    plugins = [p.name for w in catalog.plugin_workloads() for p in w.presets if p.needs_cuda == (device == "cuda")]
    return list(dict.fromkeys([*study, *plugins]))


def default_jobs(device: str) -> int:
    """Cells at once. On a GPU host one per usable core, up to 16: a cell is mostly CPU work (start-up, tracing,
    compiling, loading caches) around a short GPU timing that the lock serializes, so more workers keep the GPU
    busy until the cores run out; 16 is the most that has been measured to help. On a CPU host one, since the
    timing itself runs on the cores that compiling would take."""
    if device != "cuda":
        return 1
    return max(1, min(16, len(usable_cpus())))


def default_replicates(device: str) -> int:
    """Compiles per cell of the autotuned modes. On a GPU three: their compiles choose differently (up to 1.2x on a
    GPU-bound conv, 2.3x on a 9 us cell, seven compiles measured on an H100), and three give the best, the median
    and the spread. On a CPU one: inductor's CPU backend benchmarks no candidates, and the tiny preset is a smoke
    run."""
    return 3 if device == "cuda" else 1
