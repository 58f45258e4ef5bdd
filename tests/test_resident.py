"""A worker that stays (tracker.runner.resident): a cell's first measurement always has a fresh process; a process
takes only further compiles, never of a cell it has measured, never a kernel under test's; the runner and the worker
speak over a socket; and a process cleared between two compiles compiles the second anew, to the same code."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tracker.measure import fresh
from tracker.measure.fingerprint import compiled_fingerprint, loaded_modules
from tracker.runner.config import RunConfig
from tracker.runner.plan import CellId, Job
from tracker.runner.pool import measure_cells
from tracker.runner.resident import Channel, Request, Resident, may_take, take
from tracker.store.cells import CellStore, RunKey, torch_version

A, B = CellId("tiny", "llm_rmsnorm", "default"), CellId("tiny", "llm_layernorm", "default")


def test_a_process_takes_only_further_compiles_of_cells_it_has_not_measured() -> None:
    assert may_take(Job(B, 2), {A})
    assert may_take(Job(CellId("tiny", "llm_layernorm", "eager"), 3), {A})
    assert not may_take(Job(B, 1), {A})  # a first measurement: its compile time is the cell's, cold
    assert not may_take(Job(A, 2), {A})  # a cell's compiles stay in processes of their own
    assert not may_take(Job(CellId("tiny", "llm_rmsnorm", "kernel:triton_rmsnorm"), 2), {A})


def test_the_runner_hands_a_worker_that_stays_its_next_measurement_and_closing_tells_it_to_exit(
        tmp_path: Path) -> None:
    runner = Resident(gpu=0)
    seen: dict[str, object] = {}

    def worker() -> None:
        channel = Channel(runner.path)
        channel.report(0, True)
        seen["request"] = channel.next()
        channel.report(3, True)
        seen["after_close"] = channel.next()
        channel.close()

    thread = threading.Thread(target=worker)
    thread.start()
    assert runner.report(10, lambda: False) == ({"status": 0, "stays": True}, False)
    request = Request(["tiny", "llm_layernorm", "default", "2"], {"A": "1"}, str(tmp_path / "stderr.txt"))
    assert runner.send(request)
    assert runner.report(10, lambda: False) == ({"status": 3, "stays": True}, False)
    runner.close()
    thread.join(10)
    assert seen == {"request": request, "after_close": None}
    assert not Path(runner.path).exists()


def test_a_worker_that_exits_without_reporting_is_told_apart_from_one_that_overran(tmp_path: Path) -> None:
    runner = Resident(gpu=None)
    assert runner.report(10, lambda: True) == (None, False)  # gone: its exit status says what happened
    assert runner.report(0.3, lambda: False) == (None, True)  # still running at the time limit
    runner.close()


def test_taking_a_request_gives_the_process_exactly_its_environment_and_stderr(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPILE_BASELINES_RESIDENT", "/the/socket")
    monkeypatch.setenv("LEFT_OVER", "from the last measurement")
    saved_err = os.dup(2)
    try:
        take(Request([], {"PATH": os.environ["PATH"], "NEXT": "1"}, str(tmp_path / "stderr.txt")))
        os.write(2, b"to the new file\n")
        assert os.environ.get("NEXT") == "1" and "LEFT_OVER" not in os.environ
        assert os.environ["COMPILE_BASELINES_RESIDENT"] == "/the/socket"
    finally:
        os.dup2(saved_err, 2)
        os.close(saved_err)
    assert (tmp_path / "stderr.txt").read_text() == "to the new file\n"


@pytest.mark.slow
def test_a_compile_after_clearing_the_process_is_made_anew_and_generates_the_same_code(tmp_path: Path,
                                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                                       ) -> None:
    import torch

    from workloads import registry

    spec = registry.get(A.workload)
    prints = []
    fresh.clear()  # as a fresh process starts: whatever this process compiled before is not the test's
    for k in range(2):
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / f"inductor-{k}"))
        fn, args, kwargs = spec.build(spec.preset("tiny"), "cpu")
        before = loaded_modules()
        torch.compile(fn, dynamic=False)(*args, **kwargs)
        prints.append(compiled_fingerprint(before))
        assert fresh.fit_for_another(fresh.clear())
    assert prints[0] is not None and prints[1] is not None  # the second compiled: new generated code was loaded
    assert prints[1]["code"] == prints[0]["code"]


def _store(tmp_path: Path, stay: bool) -> tuple[list[dict[str, object]], RunConfig]:
    cells = [CellId("tiny", w, "eager") for w in ("llm_rmsnorm", "llm_layernorm", "diff_cfg_blend", "rl_dpo_loss")]
    cfg = RunConfig(store_root=tmp_path / "cells", machine="m", commit="c" * 40, jobs=2, device="cpu", replicates=3,
                    replicated_modes=None, stay=stay)
    store = CellStore(cfg.store_root, RunKey(cfg.machine, cfg.commit, torch_version()))
    measured = measure_cells(cells, cfg, store)
    assert {c: r.status for c, r in measured.items()} == dict.fromkeys(cells, "ok")
    records = [store.replicate(c.preset, c.workload, c.mode, r) for c in cells for r in (1, 2, 3)]
    return [r.to_json() for r in records if r is not None], cfg


@pytest.mark.slow
def test_a_run_s_further_compiles_go_to_processes_done_with_other_cells_and_its_first_ones_never(
        tmp_path: Path) -> None:
    records, _ = _store(tmp_path / "stay", stay=True)
    assert len(records) == 12 and all(r["status"] == "ok" for r in records)
    later = [r for r in records if r.get("process_turn")]
    assert later, "no process took a second measurement"
    assert all(r.get("replicate", 1) > 1 and r["process_turn"] >= 2 for r in later)
    fresh_only, _ = _store(tmp_path / "fresh", stay=False)
    assert len(fresh_only) == 12 and not any(r.get("process_turn") for r in fresh_only)
