"""The runner's loop (tracker.runner.pool.measure_cells) with a stand-in for the fork server: each "process" stores
the record a worker would, at once, so the loop's decisions show without measuring anything. The first attempt at
one cell runs out of memory beside the others (a constructed record of the kind the 4-GPU host's PR run stored)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tracker.measure.cellresult import CellResult
from tracker.runner import memledger, pool, remeasure, resident
from tracker.runner.config import RunConfig
from tracker.runner.forkserver import Child
from tracker.runner.plan import CellId
from tracker.runner.pool import measure_cells
from tracker.runner.workerenv import ENV_GPU
from tracker.store.cells import CellStore, RunKey

GiB = 2**30
CELLS = [CellId("prefill", w, "default") for w in ("llm_rmsnorm", "llm_layernorm", "diff_cfg_blend", "rl_dpo_loss")]
BIG = CELLS[0]


class StandIn:
    """Stores for each launch what the worker would have: out of memory for BIG's first attempt while others were in
    flight, ok otherwise; keeps each launch's environment and what else was in flight on its GPU."""

    def __init__(self, store: CellStore) -> None:
        self.store, self.launches, self.in_flight = store, [], 0
        self.preloaded: dict[str, bool] = {}  # mode -> whether its processes waited for the compiler's import
        self._lock = threading.Lock()

    def launch(self, module: str, argv: list[str], env: dict[str, str], cwd: Path, stderr: Path,
               preloaded: bool = True) -> Child:
        preset, workload, mode, replicate = argv
        with self._lock:
            first = not any(a[:3] == argv[:3] for a, _ in self.launches)
            self.launches.append((argv, env))
            self.preloaded[mode] = preloaded
        record: dict[str, Any] = {"preset": preset, "workload": workload, "mode": mode, "replicate": int(replicate),
                                  "device": "cuda", "gpu_index": env[ENV_GPU]}
        if CellId(preset, workload, mode) == BIG and first:
            record |= {"status": "failed", "samples_ms": [],
                       "reason": "out of memory: CUDA out of memory. Tried to allocate 3.80 GiB"}
        else:
            record |= {"status": "ok", "samples_ms": [0.1], "median_ms": 0.1, "p25_ms": 0.1, "compile_s": 1.0}
        self.store.put(CellResult.from_json(record))
        child = Child(len(self.launches), pid=1, status=0)
        child.forked.set()
        child.exited.set()
        return child

    def wait(self, child: Child, timeout: float | None) -> bool:
        return True

    def kill(self, child: Child) -> None:
        pass

    def close(self) -> None:
        pass


def test_what_ran_out_of_memory_beside_others_is_measured_again_alone_reserving_its_whole_gpu(tmp_path: Path) -> None:
    cfg = RunConfig(store_root=tmp_path, machine="m", commit="c" * 40, jobs=8, device="cuda", gpus=("0", "1"),
                    memory_budget=70 * GiB)
    store = CellStore(tmp_path, RunKey(cfg.machine, cfg.commit, "t"))
    server = StandIn(store)
    measured = measure_cells(CELLS, cfg, store, server=server)  # type: ignore[arg-type]  # stands in for one
    assert {c: r.status for c, r in measured.items()} == dict.fromkeys(CELLS, "ok")
    again = [env for argv, env in server.launches if argv[1] == BIG.workload]
    assert len(again) == 2 and server.launches[-1][0][1] == BIG.workload  # once more, at the end
    assert int(again[0][memledger.ENV_RESERVE]) < cfg.memory_budget  # its share, beside the others
    assert int(again[1][memledger.ENV_RESERVE]) == cfg.memory_budget  # alone: the whole GPU
    assert all(env[memledger.ENV_LEDGER].endswith(f".gpu-{env[ENV_GPU]}.memory.json") for _, env in server.launches)


def test_a_run_sharing_its_gpus_with_another_plans_within_its_share_of_their_memory(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cfg = RunConfig(store_root=tmp_path, machine="m", commit="c" * 40, jobs=8, device="cuda", gpus=("0", "1"),
                    memory_budget=70 * GiB, runs_per_gpu=2)
    store = CellStore(tmp_path, RunKey(cfg.machine, cfg.commit, "t"))
    server = StandIn(store)
    planned = []
    real = pool.Scheduler
    monkeypatch.setattr(pool, "Scheduler", lambda *a, **k: planned.append(a[4]) or real(*a, **k))
    measure_cells(CELLS, cfg, store, server=server)  # type: ignore[arg-type]  # stands in for one
    assert planned == [35 * GiB, 70 * GiB]  # its half beside the other run; the whole GPU for BIG measured again
    assert {int(env[memledger.ENV_BUDGET]) for _, env in server.launches} == {70 * GiB}  # the ledger holds the GPU's


def test_only_a_measurement_that_compiles_waits_for_the_fork_servers_import_of_the_compiler(tmp_path: Path) -> None:
    cfg = RunConfig(store_root=tmp_path, machine="m", commit="c" * 40, jobs=4, device="cuda", gpus=("0",),
                    memory_budget=70 * GiB)
    store = CellStore(tmp_path, RunKey(cfg.machine, cfg.commit, "t"))
    server = StandIn(store)
    cells = [CellId("decode", "llm_rmsnorm", mode) for mode in ("eager", "default", "kernel:triton_rmsnorm")]
    measure_cells(cells, cfg, store, server=server)  # type: ignore[arg-type]  # stands in for one
    assert server.preloaded == {"eager": False, "default": True, "kernel:triton_rmsnorm": False}


def test_a_confirmation_measures_on_every_gpu_of_the_host_with_its_memory_counted(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    class Comparison:  # what confirm_head reads of compare_runs' answer
        head = type("Run", (), {"torch": "t", "machine": "m", "commit": "c" * 40})()
        cells: list[Any] = []

    monkeypatch.setattr(remeasure, "compare_runs", lambda *a, **k: Comparison())
    monkeypatch.setattr(remeasure, "torch_version", lambda: "t")
    monkeypatch.setattr(remeasure.confirm, "candidates", lambda c: [("prefill", "llm_rmsnorm", "max-autotune")])
    monkeypatch.setattr(remeasure, "device", lambda requested: "cuda")
    monkeypatch.setattr(remeasure, "pick_gpus", lambda device, spec: ("0", "1", "2", "3"))
    monkeypatch.setattr(remeasure, "memory_budget", lambda gpus: 72 * GiB)
    monkeypatch.setattr(remeasure, "_latest", lambda *a: type("Run", (), {"date_ms": 0})())
    monkeypatch.setattr(remeasure, "run_suite", lambda cells, cfg, conf, date, out: seen.update(cfg=cfg))
    conf = type("Conf", (), {"results_dir": str(tmp_path / "results")})()
    assert remeasure.confirm_head(conf, "base", "head", "m") == 1
    cfg = seen["cfg"]
    assert cfg.gpus == ("0", "1", "2", "3") and cfg.memory_budget == 72 * GiB and cfg.jobs > 1


class Hungry(StandIn):
    """Every measurement records that its process held 30 GiB at once (its compile's), its timed region far less."""

    def launch(self, module: str, argv: list[str], env: dict[str, str], cwd: Path, stderr: Path,
               preloaded: bool = True) -> Child:
        child = super().launch(module, argv, env, cwd, stderr, preloaded)
        preset, workload, mode, replicate = argv
        record = self.store.replicate(preset, workload, mode, int(replicate))
        assert record is not None
        record.peak_mem_bytes, record.process_peak_bytes = 2 * GiB, 30 * GiB
        self.store.put(record)
        return child


def test_a_cell_s_further_compiles_reserve_what_its_first_held_in_this_run(tmp_path: Path) -> None:
    cell = CellId("prefill", "llm_layernorm", "default")
    cfg = RunConfig(store_root=tmp_path, machine="m", commit="c" * 40, jobs=4, device="cuda", gpus=("0",),
                    memory_budget=70 * GiB, replicates=3, replicated_modes=None)
    store = CellStore(tmp_path, RunKey(cfg.machine, cfg.commit, "t"))
    server = Hungry(store)
    measure_cells([cell], cfg, store, server=server)  # type: ignore[arg-type]  # stands in for one
    reserved = {int(argv[3]): int(env[memledger.ENV_RESERVE]) for argv, env in server.launches}
    assert reserved[1] < 30 * GiB  # never measured: the prior
    assert reserved[2] >= 30 * GiB and reserved[3] >= 30 * GiB  # what the first held, with room


class Disturbed(StandIn):
    """Replicate 2's first attempt and the first replicate's every attempt record a timing spread as only a
    disturbed one's does (its lower quartile half its median)."""

    def launch(self, module: str, argv: list[str], env: dict[str, str], cwd: Path, stderr: Path,
               preloaded: bool = True) -> Child:
        child = super().launch(module, argv, env, cwd, stderr, preloaded)
        preset, workload, mode, replicate = argv
        attempts = sum(a == argv for a, _ in self.launches)
        if replicate == "1" or (replicate == "2" and attempts == 1):
            record = self.store.replicate(preset, workload, mode, int(replicate))
            assert record is not None
            record.p25_ms = record.median_ms / 2
            self.store.put(record)
        return child


def test_a_disturbed_further_compile_is_measured_again_at_once_and_a_disturbed_first_alone_at_the_end(
        tmp_path: Path) -> None:
    cell = CellId("prefill", "llm_layernorm", "default")
    cfg = RunConfig(store_root=tmp_path, machine="m", commit="c" * 40, jobs=4, device="cuda", gpus=("0",),
                    memory_budget=70 * GiB, replicates=4, replicated_modes=None, together=1)
    store = CellStore(tmp_path, RunKey(cfg.machine, cfg.commit, "t"))
    server = Disturbed(store)
    measure_cells([cell], cfg, store, server=server)  # type: ignore[arg-type]  # stands in for one
    order = [(int(argv[3]), int(env[memledger.ENV_RESERVE]) == cfg.memory_budget) for argv, env in server.launches]
    # replicate 2 again before replicate 3 starts (its chain waits for it), beside the others; the first alone, last
    assert order == [(1, False), (2, False), (2, False), (3, False), (4, False), (1, True)]
    second = store.replicate(cell.preset, cell.workload, cell.mode, 2)
    assert second is not None and second.p25_ms == second.median_ms


def test_a_process_may_stay_only_in_a_run_with_further_compiles_to_hand_it(tmp_path: Path) -> None:
    for replicates, stays in ((1, False), (2, True)):
        root = tmp_path / str(replicates)
        cfg = RunConfig(store_root=root, machine="m", commit="c" * 40, jobs=2, device="cuda", gpus=("0",),
                        replicates=replicates, replicated_modes=None)
        server = StandIn(CellStore(root, RunKey(cfg.machine, cfg.commit, "t")))
        measure_cells(CELLS[1:], cfg, server.store, server=server)  # type: ignore[arg-type]  # stands in for one
        assert {resident.ENV_SOCKET in env for _, env in server.launches} == {stays}
