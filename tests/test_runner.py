"""The parallel runner's bookkeeping: balanced shards, progress that counts each cell once, who re-runs alone."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from tracker.runner import CellId, Progress, expected_cost, needs_gpu_alone, plan, shard
from workloads.names import MODES


def test_shards_are_disjoint_cover_every_cell_and_balance_expected_cost() -> None:
    cells = plan(["prefill", "decode"])
    parts = [shard(cells, i, 2) for i in (1, 2)]
    assert sorted(parts[0] + parts[1]) == sorted(cells) and not set(parts[0]) & set(parts[1])
    loads = [sum(expected_cost(c) for c in p) for p in parts]
    assert abs(loads[0] - loads[1]) <= max(expected_cost(c) for c in cells)
    assert shard(cells, 1, 2) == parts[0]  # deterministic: every runner of a matrix agrees


def test_a_cell_re_run_alone_replaces_its_first_result_in_the_progress_counts() -> None:
    out = io.StringIO()
    progress = Progress(2, out)
    a, b = CellId("prefill", "llm_rmsnorm", MODES[0]), CellId("prefill", "llm_rmsnorm", MODES[1])
    progress.cell_done(a, {"status": "failed", "reason": "out of memory: CUDA out of memory"})
    progress.cell_done(b, {"status": "ok", "median_ms": 0.1, "compile_s": 1.0})
    progress.cell_done(a, {"status": "ok", "median_ms": 0.5, "compile_s": 0.0})
    assert (progress.done, progress.failed) == (2, 0)
    assert out.getvalue().splitlines()[-1].startswith("[2/2]")


def test_cells_that_shared_the_gpu_short_of_memory_run_again_alone() -> None:
    assert needs_gpu_alone({"status": "failed", "reason": "out of memory: CUDA out of memory. Tried ..."})
    assert needs_gpu_alone({"status": "ok", "flush_capped": True})  # its timing may include host time
    assert not needs_gpu_alone({"status": "ok", "flush_capped": False})
    assert not needs_gpu_alone({"status": "failed", "reason": "incorrect: output 0 differs"})


def test_the_agreement_benchmark_reproduces_its_recorded_h100_figures() -> None:
    # tools/bench_runner.py agree on the committed serial and parallel cell stores (see their PROVENANCE.md)
    root = Path(__file__).resolve().parent.parent
    fixture = root / "tests" / "fixtures" / "h100-runner"
    out = subprocess.run([sys.executable, "tools/bench_runner.py", "agree", str(fixture / "serial"),
                          str(fixture / "cold")], capture_output=True, text=True, check=True, cwd=root).stdout
    assert out == (fixture / "agree-serial-vs-cold.txt").read_text()
    assert "cells compared: 40 (serial 40, parallel 205)" in out
