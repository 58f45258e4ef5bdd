"""Every GPU of a host in one run (`run --gpus`): which GPUs, all of one model, which one each measurement gets, and
what its worker sees. The scheduling runs for real on the CPU with a simulated list of two GPUs (the workers measure
on the CPU; CUDA_VISIBLE_DEVICES, the locks and the timing cores are set as on a GPU host). The GPU models come from
nvidia-smi's output as written below (this machine has no GPU)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tracker import cli
from tracker.errors import UsageError
from tracker.measure import gpulock
from tracker.measure.harness import Settings
from tracker.runner import gpus, policy
from tracker.runner.config import RunConfig
from tracker.runner.plan import CellId
from tracker.runner.policy import default_jobs
from tracker.runner.pool import measure_cells
from tracker.runner.progress import Progress
from tracker.runner.workerenv import ENV_GPU, worker_env
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
    with pytest.raises(UsageError, match=message):
        gpus.select(spec, HOST)
    with pytest.raises(UsageError, match="no CUDA device"):
        gpus.select(None, ())


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,GPU-5e1c")
    assert gpus.visible() == ("2", "GPU-5e1c")


H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
UUIDS = ("GPU-5e1c0a4f-8b2d-4c6e-9f13-2a7b8c9d0e1f", "GPU-9a3d7e21-04bc-4f58-a6e2-7c1d9b0f3e54",
         "GPU-c27f5b90-6e1a-4d3c-8b47-f05e2a9c1d68", "GPU-3b8e1d6c-9f24-47a0-b5c1-e8d2f7a06b93")
# `nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader` on a host of four H100s, and on one whose third GPU
# (PCI bus order) is an A100
SAME = "".join(f"{i}, {u}, {H100}\n" for i, u in enumerate(UUIDS))
MIXED = "".join(f"{i}, {u}, {A100 if i == 2 else H100}\n" for i, u in enumerate(UUIDS))


def test_gpus_of_one_model_pass_in_any_numbering() -> None:
    for order in (None, "PCI_BUS_ID"):
        gpus.check_one_model(HOST, HOST, SAME, order)
    gpus.check_one_model(UUIDS[:2], UUIDS, SAME, None)


def test_gpus_of_different_models_are_refused_naming_them_and_the_indices_of_each_model() -> None:
    with pytest.raises(UsageError, match="different models") as refused:
        gpus.check_one_model(("0", "2"), HOST, MIXED, "PCI_BUS_ID")
    assert str(refused.value).startswith(f"--gpus picks GPUs of different models (0: {H100}, 2: {A100})")
    assert str(refused.value).endswith(f"e.g. --gpus 0,1,3 ({H100}) or --gpus 2, ({A100})")
    with pytest.raises(UsageError, match="different models"):
        gpus.check_one_model(HOST, HOST, MIXED, "PCI_BUS_ID")  # --gpus all
    gpus.check_one_model(("0", "1", "3"), HOST, MIXED, "PCI_BUS_ID")  # the suggestion passes
    gpus.check_one_model(("2",), HOST, MIXED, None)  # one GPU is one model


def test_on_a_host_of_several_models_an_index_needs_pci_bus_order_to_name_a_model() -> None:
    # CUDA numbers the GPUs fastest first by default: CUDA's 0 and 1 may be nvidia-smi's 0 and 1, or 0 and 3
    with pytest.raises(UsageError, match="CUDA_DEVICE_ORDER=PCI_BUS_ID") as refused:
        gpus.check_one_model(("0", "1"), HOST, MIXED, None)
    assert f"nvidia-smi: 0: {H100}, 1: {H100}, 2: {A100}, 3: {H100}" in str(refused.value)


def test_uuids_in_cuda_visible_devices_map_to_their_models_whole_or_a_prefix() -> None:
    host = (UUIDS[0], UUIDS[2][:12], UUIDS[3])  # CUDA_VISIBLE_DEVICES takes a UUID's unique prefix too
    with pytest.raises(UsageError, match="different models") as refused:
        gpus.check_one_model(host, host, MIXED, None)  # UUIDs name one GPU in any device order
    assert f"0 ({UUIDS[0]}): {H100}, 1 ({UUIDS[2][:12]}): {A100}, 2 ({UUIDS[3]}): {H100}" in str(refused.value)
    assert f"--gpus 0,2 ({H100}) or --gpus 1, ({A100})" in str(refused.value)
    gpus.check_one_model((host[0], host[2]), host, MIXED, None)
    gpus.check_one_model(("MIG-0c4b1f2e-77d1-5a3e-9b62-4e8f0d1c2a35", UUIDS[0]), host, MIXED, None)  # not mapped


def test_without_nvidia_smi_the_models_are_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        raise subprocess.CalledProcessError(9, args[0], "", "NVIDIA-SMI has failed: couldn't communicate with the "
                                            "NVIDIA driver")

    def listing(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args[0], 0, MIXED, "")

    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    assert gpus.nvidia_smi(listing) == MIXED
    assert gpus.nvidia_smi(failing) is None
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert gpus.nvidia_smi(listing) is None
    gpus.check_one_model(HOST, HOST, None, None)


def test_run_refuses_gpus_of_different_models_before_writing_anything(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(HOST))  # read without torch
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.setattr(gpus, "nvidia_smi", lambda: MIXED)
    argv = ["run", "--device", "cuda", "--gpus", "1,2", "--commit", "abc1234", "--results-dir", str(tmp_path / "r"),
            "--workload", "llm_rmsnorm", "--mode", "eager"]
    assert cli.main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line]
    assert err == [f"compile-baselines run: error: --gpus picks GPUs of different models (1: {H100}, 2: {A100}) and a "
                   f"run's results are keyed by one GPU model: measure one model a run, e.g. --gpus 0,1,3 ({H100}) "
                   f"or --gpus 2, ({A100})"]
    assert list(tmp_path.iterdir()) == []  # no results directory, no cell store


def test_each_gpu_has_its_own_lock_timing_cores_and_device_and_the_compilers_share_the_rest(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(32)), raising=False)
    cfg = RunConfig(store_root=tmp_path, machine="m", commit="c", jobs=28, gpus=("0", "GPU-5e1c"))
    cell = CellId("prefill", "llm_rmsnorm", "default")
    first, second = (worker_env(cfg, cell, str(tmp_path / "inductor"), str(tmp_path / "triton"), slot)
                     for slot in (0, 1))
    assert (first["CUDA_VISIBLE_DEVICES"], second["CUDA_VISIBLE_DEVICES"]) == ("0", "GPU-5e1c")
    assert (first[ENV_GPU], second[ENV_GPU]) == ("0", "GPU-5e1c")
    assert first[gpulock.ENV_LOCK] != second[gpulock.ENV_LOCK]
    assert (first[gpulock.ENV_TIMING_CPUS], second[gpulock.ENV_TIMING_CPUS]) == ("0,1", "2,3")
    # a compiling worker keeps off every GPU's timing cores, not only its own GPU's
    assert first[gpulock.ENV_RESERVED_CPUS] == second[gpulock.ENV_RESERVED_CPUS] == "0,1,2,3"
    assert first["TORCHINDUCTOR_COMPILE_THREADS"] == str((32 - 4) // 28)
    assert default_jobs("cuda", 2) == 32 and default_jobs("cuda", 1) == 16
    assert default_jobs("cuda", 4) == 32  # the host's processes in flight slow each one's CUDA start


@pytest.mark.slow
@pytest.mark.parametrize(("value", "runs"), [(None, 1), ("1", 1), ("2", 2), (" 3 ", 3)])
def test_the_runs_sharing_a_gpu_are_what_the_flow_that_started_them_says(
        monkeypatch: pytest.MonkeyPatch, value: str | None, runs: int) -> None:
    if value is None:
        monkeypatch.delenv(policy.ENV_RUNS_PER_GPU, raising=False)
    else:
        monkeypatch.setenv(policy.ENV_RUNS_PER_GPU, value)
    assert policy.runs_per_gpu() == runs
    cfg = RunConfig(store_root=Path("."), machine="m", commit="c", memory_budget=90, runs_per_gpu=runs)
    assert cfg.planned_memory == 90 // runs


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_number_of_runs_sharing_a_gpu_that_is_none_is_one_clear_error(
        monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(policy.ENV_RUNS_PER_GPU, value)
    with pytest.raises(UsageError, match=f"{policy.ENV_RUNS_PER_GPU}='{value}'"):
        policy.runs_per_gpu()


def test_one_run_on_two_gpus_measures_every_cell_once_into_one_store(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(gpulock.ENV_SETTLE_MS, "5")  # asked for: each record says how long it settled
    cells = [CellId("tiny", w, "eager") for w in ("llm_rmsnorm", "diff_cfg_blend", "rl_dpo_loss", "rl_grpo_loss")]
    cfg = RunConfig(store_root=tmp_path, machine="m", commit="c" * 40, jobs=2, device="cpu", gpus=("0", "1"),
                    settings=Settings(warmup_ms=1, rep_ms=20, warmup_calls=1))
    store = CellStore(tmp_path, RunKey("m", "c" * 40, torch_version()))
    out = io.StringIO()
    progress = Progress(len(cells), out)
    measured = measure_cells(cells, cfg, store, progress)
    assert set(measured) == set(cells) and all(r.status == "ok" for r in measured.values())
    records = [store.replicate(c.preset, c.workload, c.mode) for c in cells]
    assert {r.gpu_index for r in records} == {"0", "1"}  # both GPUs measured
    for r in records:  # when each ran: what tools/bench_runner.py phases lays out per GPU over time
        assert r.launched_at <= r.started_at < r.ended_at
        assert {"inputs", "first_call", "warmup", "timing"} <= set(r.phase_at)
        assert r.lock_spans and all(asked <= got <= released for asked, got, released in r.lock_spans)
        assert r.lock_settled_s == 0.0  # eager autotunes nothing: it never settles
    assert "per GPU: 0 " in progress.lock_share() and ", 1 " in progress.lock_share()
