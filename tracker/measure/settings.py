"""How a cell is measured (do_bench's budgets, the warm-up, the time limit, the CPU threads): a module of its own,
so that what only passes settings along (the runner's configuration, `pr`) does not import torch with the harness."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    """Measurement settings; the defaults are the study's."""

    warmup_ms: float = 100.0  # do_bench warmup budget
    rep_ms: float = 1000.0  # do_bench measurement budget
    warmup_calls: int = 20  # direct calls after compiling, before timing
    time_limit_s: float | None = None  # the whole cell, compile included
    # The study calls CUDA-graph modes plainly; marking each step is offered as the alternative.
    cudagraph_mark_step: bool = False
    # Threads of a cell on a CPU (torch's intra-op and inductor's OpenMP kernels, fixed when compiled): one keeps the
    # timing steady on a shared or loaded host, where a parallel kernel waits for whichever of its threads the
    # scheduler left out (README, "Commands", has the figures).
    cpu_threads: int = 1
