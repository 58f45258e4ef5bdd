"""The parallel runner's bookkeeping: balanced shards, progress that counts each cell once, who re-runs alone (the
scheduler itself: tests/test_schedule.py)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tracker.errors import UsageError
from tracker.measure import gpulock
from tracker.measure.cellresult import CellResult
from tracker.runner import policy
from tracker.runner.config import RunConfig
from tracker.runner.costs import expected_cost
from tracker.runner.plan import CellId, Job, plan
from tracker.runner.policy import default_jobs
from tracker.runner.pool import needs_gpu_alone
from tracker.runner.progress import Progress
from tracker.runner.schedule import shard
from tracker.runner.workerenv import cache_dirs, worker_env
from tracker.store.cells import CellStore, RunKey
from workloads.modes import COMPILED
from workloads.names import MODES


def test_shards_are_disjoint_cover_every_cell_and_balance_expected_cost() -> None:
    cells = plan(["prefill", "decode"])
    parts = [shard(cells, i, 2) for i in (1, 2)]
    assert sorted(parts[0] + parts[1]) == sorted(cells) and not set(parts[0]) & set(parts[1])
    loads = [sum(expected_cost(c) for c in p) for p in parts]
    assert abs(loads[0] - loads[1]) <= max(expected_cost(c) for c in cells)
    assert shard(cells, 1, 2) == parts[0]  # deterministic: every runner of a matrix agrees


def test_max_autotune_costs_more_where_the_workload_has_gemm_or_conv_templates_to_tune() -> None:
    # the workloads' tags say which: a GEMM (llm_swiglu_mlp), a convolution (diff_vae_decoder_upsample), neither
    def cost(workload: str, mode: str = "max-autotune") -> float:
        return expected_cost(CellId("prefill", workload, mode))

    assert cost("llm_swiglu_mlp") == cost("diff_vae_decoder_upsample") > cost("llm_rmsnorm")
    assert cost("llm_swiglu_mlp", "default") == cost("llm_rmsnorm", "default")


def test_a_cells_compiles_share_triton_binaries_and_each_autotunes_in_a_cache_of_its_own(tmp_path: Path) -> None:
    cell, other = CellId("prefill", "llm_rmsnorm", "max-autotune"), CellId("prefill", "llm_rmsnorm", "default")
    kernels = tmp_path / "kernels"
    cold = RunConfig(store_root=tmp_path, machine="m", commit="c", replicates=3)
    (ind1, tri1), (ind2, tri2) = (cache_dirs(Job(cell, r), cold, str(tmp_path / f"tmp{r}"), kernels) for r in (1, 2))
    assert tri1 == tri2 != cache_dirs(Job(other), cold, str(tmp_path / "tmp3"), kernels)[1]
    assert ind1 != ind2 and ind1.startswith(str(tmp_path / "tmp1"))  # inductor's: the measurement's own, fresh
    warm = RunConfig(store_root=tmp_path, machine="m", commit="c", replicates=3, warm_cache_dir=tmp_path / "warm")
    (ind1, tri1), (ind2, tri2) = (cache_dirs(Job(cell, r), warm, "unused", kernels) for r in (1, 2))
    assert tri1 == tri2 and ind1 != ind2 and ind1.startswith(str(tmp_path / "warm"))


def test_a_cell_re_run_alone_replaces_its_first_result_in_the_progress_counts() -> None:
    out = io.StringIO()
    progress = Progress(2, out)
    a, b = CellId("prefill", "llm_rmsnorm", MODES[0]), CellId("prefill", "llm_rmsnorm", MODES[1])
    progress.cell_done(a, CellResult.from_json({"status": "failed", "reason": "out of memory: CUDA out of memory"}))
    progress.cell_done(b, CellResult.from_json({"status": "ok", "median_ms": 0.1, "compile_s": 1.0}))
    progress.cell_done(a, CellResult.from_json({"status": "ok", "median_ms": 0.5, "compile_s": 0.0}))
    assert (progress.done, progress.failed) == (2, 0)
    assert out.getvalue().splitlines()[-1].startswith("[2/2]")


def test_the_gpu_lock_excludes_a_second_holder_and_counts_held_and_waited_time(tmp_path: Path) -> None:
    first, second = gpulock.GpuLock(str(tmp_path / "gpu.lock")), gpulock.GpuLock(str(tmp_path / "gpu.lock"))
    inside = threading.Event()

    def take_second() -> None:
        with second.held():
            inside.set()

    with first.held(), first.held():  # re-entrant: do_bench inside a cell's held lock
        waiter = threading.Thread(target=take_second)
        waiter.start()
        assert not inside.wait(0.3)  # flock on one file excludes it while the first holds it
    waiter.join(5)
    assert inside.is_set()
    assert first.held_s >= 0.3 and first.wait_s < first.held_s
    assert second.wait_s >= 0.2 and second.held_s < 0.3


def test_autotuning_settles_the_gpu_after_another_process_held_the_lock_and_only_then(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")

    def neighbour_holds_it() -> None:
        subprocess.run([sys.executable, "-c", "import sys; from tracker.measure import gpulock\n"
                        "with gpulock.GpuLock(sys.argv[1]).held(): pass", path], check=True)

    lock = gpulock.GpuLock(path, settle_s=0.05)
    neighbour_holds_it()
    with lock.held():  # the cell's own phases never settle
        pass
    assert lock.settled_s == 0.0
    neighbour_holds_it()
    with lock.held(settled=True), lock.held(settled=True):  # an autotuning benchmark after the neighbour's hold
        pass
    assert lock.settled_s == 0.05 and lock.held_s >= 0.05
    with lock.held(settled=True):  # its own hold was the last: no wait
        pass
    assert lock.settled_s == 0.05
    assert gpulock.GpuLock(path).settle_s == 0.0  # no settle time: never waits


def test_asked_to_settle_only_after_long_holds_autotuning_settles_after_another_s_long_hold_and_not_a_brief_one(
        tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    lock = gpulock.GpuLock(path, settle_s=0.05, settle_after_s=0.05)
    for neighbour_held, settles in (("1 10", 0.0), ("1 50", 0.05), ("1", 0.05)):  # pid 1: another process
        Path(path).write_bytes(neighbour_held.encode().ljust(gpulock.HOLDER_BYTES))
        with lock.held(settled=True):  # a hold that did not say how long it was counts as long
            pass
        assert lock.settled_s == pytest.approx(settles), neighbour_held
        lock.restart()
    holder, held_ms = Path(path).read_bytes().split()  # each release says who held it and for how long
    assert int(holder) == os.getpid() and held_ms.isdigit()


def test_with_a_settle_time_each_of_autotuning_s_choices_is_one_hold_settled_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._inductor.runtime import benchmarking
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    from torch._inductor.select_algorithm import AlgorithmSelectorCache

    for cls in (c for c in vars(benchmarking).values() if isinstance(c, type)):  # install patches them: undone after
        for attr in ("benchmark_gpu", "benchmark_gpu_with_cuda_graph"):
            if attr in cls.__dict__:
                monkeypatch.setattr(cls, attr, cls.__dict__[attr])
    path = str(tmp_path / "gpu.lock")
    lock = gpulock.GpuLock(path, settle_s=0.05)
    inside = []

    def benchmark_each(n: int) -> list[float]:  # a choice's benchmarks, each asking for a settled GPU as they do
        for _ in range(n):
            with lock.held(settled=True):
                inside.append(lock._depth)
        return [1.0] * n

    monkeypatch.setattr(CachingAutotuner, "benchmark_all_configs", lambda self, n: benchmark_each(n))
    monkeypatch.setattr(AlgorithmSelectorCache, "benchmark_choices", classmethod(lambda cls, n: benchmark_each(n)))
    gpulock.install(gpulock.GpuLock(path))  # no settle time: a choice's benchmarks hold the lock each on their own
    CachingAutotuner.benchmark_all_configs(object(), 2)
    assert inside == [1, 1]
    gpulock.install(lock)
    a_kernel_s_configs = lambda n: CachingAutotuner.benchmark_all_configs(object(), n)  # noqa: E731
    for choose in (a_kernel_s_configs, AlgorithmSelectorCache.benchmark_choices):
        Path(path).write_bytes(b"1".ljust(gpulock.HOLDER_BYTES))  # another process (pid 1) held the GPU last
        inside.clear()
        assert choose(3) == [1.0] * 3
        assert inside == [2, 2, 2] and lock.settled_s == pytest.approx(0.05)  # one hold, one settle, for three
        lock.restart()


def test_autotuning_s_benchmarks_ask_for_a_settled_gpu_and_the_settle_time_comes_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = []

    class Lock:
        def held(self, settled: bool = False):
            asked.append(settled)
            return contextlib.nullcontext()

    assert gpulock._locked(Lock(), lambda: 7)() == 7 and asked == [True]  # type: ignore[arg-type]
    monkeypatch.setenv(gpulock.ENV_LOCK, str(tmp_path / "gpu.lock"))
    monkeypatch.setenv(gpulock.ENV_SETTLE_MS, "100")
    monkeypatch.setenv(gpulock.ENV_SETTLE_AFTER_MS, "50")
    lock = gpulock.from_env()
    assert lock is not None and (lock.settle_s, lock.settle_after_s) == pytest.approx((0.1, 0.05))
    for name in (gpulock.ENV_SETTLE_MS, gpulock.ENV_SETTLE_AFTER_MS):
        for bad in ("-1", "soon", "nan"):
            with monkeypatch.context() as m:
                m.setenv(name, bad)
                with pytest.raises(UsageError, match=f"{name}='{bad}': milliseconds"):
                    policy.autotune_settle()
    monkeypatch.delenv(gpulock.ENV_SETTLE_MS)
    monkeypatch.delenv(gpulock.ENV_SETTLE_AFTER_MS)
    assert policy.autotune_settle() == (0.0, 0.0) and gpulock.from_env().settle_s == 0.0  # type: ignore[union-attr]


def test_a_run_says_up_front_that_autotuning_will_settle_where_it_was_asked_to_and_compiles_are_planned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracker.runner.suite import plan_line

    cfg = RunConfig(store_root=tmp_path, machine="m", commit="c" * 40, jobs=8)
    compiled, eager = CellId("prefill", "llm_rmsnorm", COMPILED[0]), CellId("prefill", "llm_rmsnorm", "eager")
    monkeypatch.setenv(gpulock.ENV_SETTLE_MS, "100")
    said = plan_line([compiled, eager], cfg, 0, 2)
    assert said.startswith("2 cells (0 already measured for this commit, machine and torch): 2 measurements to make")
    assert said.endswith(f"autotuning settles the GPU 100 ms a choice after another process's hold "
                         f"({gpulock.ENV_SETTLE_MS})")
    assert "settles" not in plan_line([eager], cfg, 0, 1)  # nothing compiled: nothing to settle
    monkeypatch.setenv(gpulock.ENV_SETTLE_AFTER_MS, "50")
    assert "100 ms a choice after another process's hold of 50 ms or more" in plan_line([compiled, eager], cfg, 0, 2)
    monkeypatch.delenv(gpulock.ENV_SETTLE_MS)
    assert "settles" not in plan_line([compiled, eager], cfg, 0, 2)


def test_a_run_reports_how_much_of_its_wall_time_the_gpu_lock_was_held() -> None:
    progress = Progress(2, io.StringIO())
    progress.start -= 10.0
    progress.cell_done(CellId("decode", "llm_rmsnorm", "eager"), CellResult.from_json(
        {"status": "ok", "median_ms": 0.1, "compile_s": 0.0, "lock_held_s": 3.0}))
    progress.cell_done(CellId("decode", "llm_rmsnorm", "default"), CellResult.from_json(
        {"status": "ok", "median_ms": 0.1, "compile_s": 1.0, "lock_held_s": 4.0}))
    assert progress.lock_share().startswith("GPU lock held 7 s of 10 s (70%), 3.50 s a cell")
    assert Progress(1, io.StringIO()).lock_share() == ""  # serial or CPU runs hold no lock


def test_the_launch_floor_is_kept_once_per_run_beside_its_cells(tmp_path: Path) -> None:
    store = CellStore(tmp_path, RunKey("m", "c", "2.11.0"))
    assert store.launch_floor() is None
    store.set_launch_floor(4.4)
    assert store.launch_floor() == 4.4 and store.all() == []  # not a cell
    (store.dir / "launch-floor.json").write_text("{not json")
    assert store.launch_floor() is None  # unreadable: the next cell measures it again


def test_cells_that_shared_the_gpu_short_of_memory_run_again_alone() -> None:
    assert needs_gpu_alone(CellResult.from_json(
        {"status": "failed", "reason": "out of memory: CUDA out of memory. Tried ..."}))
    # its timing may include host time
    assert needs_gpu_alone(CellResult.from_json({"status": "ok", "flush_capped": True}))
    assert not needs_gpu_alone(CellResult.from_json({"status": "ok", "flush_capped": False}))
    assert not needs_gpu_alone(CellResult.from_json({"status": "failed", "reason": "incorrect: output 0 differs"}))


def test_a_timing_spread_like_a_disturbed_one_runs_again_alone() -> None:
    fixture = Path(__file__).resolve().parent / "fixtures" / "h100-runner"
    cold, warm = (json.loads((fixture / "logs" / f"h200x2-{run}-prefill-diff_cfg_blend-default.json").read_text())
                  for run in ("cold", "warm"))
    # 2-GPU warm run: p25 8.7 us, median 16.1 us (cold: 5.9 and 6.2 us)
    assert needs_gpu_alone(CellResult.from_json(warm))
    assert not needs_gpu_alone(CellResult.from_json(cold))
    widest_clean = json.loads((fixture / "warm" / "decode" / "rl_ppo_clipped_loss" / "default.json").read_text())
    assert not needs_gpu_alone(CellResult.from_json(widest_clean))  # p25 10.7% under the median


@pytest.mark.slow
def test_the_agreement_benchmark_reproduces_its_recorded_h100_figures() -> None:
    # tools/bench_runner.py agree on the committed serial and parallel cell stores (see their PROVENANCE.md)
    root = Path(__file__).resolve().parent.parent
    fixture = root / "tests" / "fixtures" / "h100-runner"
    out = subprocess.run([sys.executable, "tools/bench_runner.py", "agree", str(fixture / "serial"),
                          str(fixture / "cold")], capture_output=True, text=True, check=True, cwd=root).stdout
    assert out == (fixture / "agree-serial-vs-cold.txt").read_text()
    assert "cells compared: 40 (serial 40, parallel 205)" in out


@pytest.mark.slow
def test_the_compile_spread_benchmark_reproduces_its_recorded_h100_table() -> None:
    # tools/bench_runner.py spread on the committed cold compiles (tests/fixtures/h100-compiles/PROVENANCE.md)
    root = Path(__file__).resolve().parent.parent
    fixture = root / "tests" / "fixtures" / "h100-compiles"
    stores = [str(fixture / f"rep{i}") for i in range(1, 8)]
    out = subprocess.run([sys.executable, "tools/bench_runner.py", "spread", *stores], capture_output=True, text=True,
                         check=True, cwd=root).stdout
    assert out == (fixture / "spread.txt").read_text()
    rows = {line[:54].strip(): line.split() for line in out.splitlines()[1:]}
    assert len(rows) == 18 and all(r[3] == "7" for r in rows.values())
    # the same generated code timed 8.5-19.5 us: only the launch configs differ between its compiles
    assert rows["prefill rl_ppo_clipped_loss max-autotune-no-cudagraphs"][-4:] == ["2.29x", "3:", "1,", "3"]


@pytest.mark.parametrize(("trial", "out"), [
    ("t12-h200x2-r8", "136 pairs: their timings 6.3 s apart (median), p90 46.6 s, at most 65.6 s\n"
                      "272 measurements waited 2241 s for memory in all, 72 over 5 s\n"),
    ("t12-h200x2-r9", "136 pairs: their timings 3.1 s apart (median), p90 9.8 s, at most 50.4 s\n"
                      "272 measurements waited 0 s for memory in all, 0 over 5 s\n")])
def test_the_pairs_benchmark_reproduces_the_recorded_figures_of_a_pr_before_and_after_the_memory_shares(
        trial: str, out: str) -> None:
    # tools/bench_runner.py pairs on two committed PR runs (tests/fixtures/h100-plant-truth/PROVENANCE.md, r8 and r9)
    root = Path(__file__).resolve().parent.parent
    cells = root / "tests" / "fixtures" / "h100-plant-truth" / trial / "verdict" / "cells" / "h100-t12"
    sides = {d.name[:8]: str(d / "torch-2.11.0+cu130") for d in cells.iterdir()}
    base, head = {"t12-h200x2-r8": ("36ce3713", "2ce272a7"), "t12-h200x2-r9": ("664a5265", "764f30ec")}[trial]
    done = subprocess.run([sys.executable, "tools/bench_runner.py", "pairs", sides[base], sides[head]],
                          capture_output=True, text=True, check=True, cwd=root)
    assert done.stdout == out


def test_a_shard_pinned_to_part_of_a_host_counts_only_its_own_cores(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16, 32)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 32)
    cfg = RunConfig(store_root=tmp_path, machine="m", commit="c", jobs=7)
    env = worker_env(cfg, CellId("prefill", "llm_rmsnorm", "default"), str(tmp_path / "inductor"),
                         str(tmp_path / "triton"))
    assert env[gpulock.ENV_TIMING_CPUS] == "16,17"  # not the other shard's timing cores 0,1
    assert env["TORCHINDUCTOR_COMPILE_THREADS"] == str((16 - 2) // 7)
    assert default_jobs("cuda") == 16 and default_jobs("cpu") == 1  # one worker per core of its own


@pytest.mark.slow
def test_the_phase_benchmark_splits_a_run_s_gpu_lock_between_timing_and_autotuning() -> None:
    # tools/bench_runner.py phases on the cold full run h100-e (tests/fixtures/h100-aa3/PROVENANCE.md), its
    # confirmation's compiles included: autotuning's benchmarks hold the lock longer than the cells' own timing
    root = Path(__file__).resolve().parent.parent
    store = next((root / "tests" / "fixtures" / "h100-aa3" / "cells" / "h100-e").glob("*/torch-*"))
    out = subprocess.run([sys.executable, "tools/bench_runner.py", "phases", str(store)], capture_output=True,
                         text=True, check=True, cwd=root).stdout
    assert out.startswith("213 ok cells, 473 measurements")
    [line] = [x for x in out.splitlines() if x.startswith("GPU lock held")]
    held, timing, compiles = (int(x) for x in re.findall(r"(\d+) s", line))
    assert abs(held - timing - compiles) <= 1 and compiles > timing
