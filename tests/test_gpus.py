"""Every GPU of a host in one run (`run --gpus`): which GPUs, which one each measurement gets, and what its worker
sees. The scheduling runs for real on the CPU with a simulated list of two GPUs (the workers measure on the CPU;
CUDA_VISIBLE_DEVICES, the locks and the timing cores are set as on a GPU host)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from tracker.measure import gpulock
from tracker.measure.harness import Settings
from tracker.runner import gpus
from tracker.runner.policy import default_jobs
from tracker.runner.pool import CellId, Progress, RunConfig, measure_cells
from tracker.runner.worker import ENV_GPU
from tracker.store.cells import CellStore, RunKey, torch_version

HOST = ("0", "1", "2", "3")


@pytest.mark.parametrize(("spec", "picked"), [(None, HOST), ("all", HOST), ("2", ("0", "1")),
                                              ("0,2", ("0", "2")), ("3,", ("3",))])
def test_gpus_are_all_of_the_host_the_first_n_or_those_listed(spec: str | None, picked: tuple[str, ...]) -> None:
    assert gpus.select(spec, HOST) == picked


@pytest.mark.parametrize(("spec", "message"), [("5", "this host has 4 GPUs"), ("0", "this host has 4 GPUs"),
                                               ("0,4", "indices 0 to 3"), ("1,1", "each once"),
                                               ("fast", "a count or a list of indices")])
def test_a_selection_the_host_cannot_meet_is_one_clear_error(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gpus.select(spec, HOST)
    with pytest.raises(ValueError, match="no CUDA device"):
        gpus.select(None, ())


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,GPU-5e1c")
    assert gpus.visible() == ("2", "GPU-5e1c")


def test_a_measurement_starts_on_the_gpu_with_the_least_work_in_flight() -> None:
    slots = gpus.GpuSlots(2)
    assert [slots.acquire(c) for c in (60.0, 20.0, 6.0, 6.0)] == [0, 1, 1, 1]  # 60 | 20 + 6 + 6
    slots.release(0, 60.0)
    assert slots.acquire(20.0) == 0


def test_each_gpu_has_its_own_lock_timing_cores_and_device_and_the_compilers_share_the_rest(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(32)), raising=False)
    cfg = RunConfig(store_root=tmp_path, machine="m", commit="c", jobs=28, gpus=("0", "GPU-5e1c"))
    cell = CellId("prefill", "llm_rmsnorm", "default")
    first, second = (cfg.worker_env(cell, str(tmp_path / "inductor"), str(tmp_path / "triton"), slot)
                     for slot in (0, 1))
    assert (first["CUDA_VISIBLE_DEVICES"], second["CUDA_VISIBLE_DEVICES"]) == ("0", "GPU-5e1c")
    assert (first[ENV_GPU], second[ENV_GPU]) == ("0", "GPU-5e1c")
    assert first[gpulock.ENV_LOCK] != second[gpulock.ENV_LOCK]
    assert (first[gpulock.ENV_TIMING_CPUS], second[gpulock.ENV_TIMING_CPUS]) == ("0,1", "2,3")
    # a compiling worker keeps off every GPU's timing cores, not only its own GPU's
    assert first[gpulock.ENV_RESERVED_CPUS] == second[gpulock.ENV_RESERVED_CPUS] == "0,1,2,3"
    assert first["TORCHINDUCTOR_COMPILE_THREADS"] == str((32 - 4) // 28)
    assert default_jobs("cuda", 2) == 32 and default_jobs("cuda", 1) == 16


def test_one_run_on_two_gpus_measures_every_cell_once_into_one_store(tmp_path: Path) -> None:
    cells = [CellId("tiny", w, "eager") for w in ("llm_rmsnorm", "diff_cfg_blend", "rl_dpo_loss", "rl_grpo_loss")]
    cfg = RunConfig(store_root=tmp_path, machine="m", commit="c" * 40, jobs=2, device="cpu", gpus=("0", "1"),
                    settings=Settings(warmup_ms=1, rep_ms=20, warmup_calls=1))
    store = CellStore(tmp_path, RunKey("m", "c" * 40, torch_version()))
    out = io.StringIO()
    progress = Progress(len(cells), out)
    measured = measure_cells(cells, cfg, store, progress)
    assert set(measured) == set(cells) and all(r["status"] == "ok" for r in measured.values())
    on = [store.replicate(c.preset, c.workload, c.mode)["gpu_index"] for c in cells]
    assert set(on) == {"0", "1"}  # both GPUs measured
    assert "per GPU: 0 " in progress.lock_share() and ", 1 " in progress.lock_share()
