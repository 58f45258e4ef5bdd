"""Storage faults are the tool's, never a cell's: one line, a non-zero exit, and what was kept before stays.

A measurement the cell store cannot keep (a full disk, a read-only store) stops the run (exit 1) instead of being
recorded as a failed cell that no later run measures again; `merge` checks that it can write every folder it writes
into before it writes any, and a write that fails half-way (a full disk, which nothing can check beforehand) names
what was merged, complete, and how to finish. Full disks are a patched writer here, and a real tmpfs where the test
may mount one; read-only folders are a patched os.access, and a real read-only bind mount where it may make one.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tracker import cli
from tracker.measure.cellresult import CellResult
from tracker.runner import pool, worker
from tracker.runner.config import RunConfig
from tracker.runner.costs import Cost
from tracker.runner.plan import CellId, Job
from tracker.runner.pool import NotKept
from tracker.runner.schedule import Start
from tracker.store import asvfiles, atomic, merge
from tracker.store.cells import CellStore, RunKey

ROOT = Path(__file__).resolve().parent.parent
AA2 = ROOT / "tests" / "fixtures" / "h100-aa2"  # a real run of two machines, with its cell store
COMMIT = "c" * 40
CELL = CellId("tiny", "llm_rmsnorm", "eager")


def disk_full(*args: Any, **kwargs: Any) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------------------------------- run


def test_a_worker_that_cannot_keep_its_measurement_says_so_and_exits_not_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    measured = {"preset": CELL.preset, "workload": CELL.workload, "mode": CELL.mode, "device": "cpu",
                "status": "ok", "median_ms": 0.05, "samples_ms": [0.05] * 10, "compile_s": 0.0}
    monkeypatch.setattr(worker, "measure_cell", lambda *a, **k: CellResult.from_json({**measured, "launch_us": 4.2}))
    monkeypatch.setenv("COMPILE_BASELINES_CELLS", str(tmp_path))
    monkeypatch.setenv("ASV_COMMIT", COMMIT)
    monkeypatch.setattr(atomic, "write_text", disk_full)
    assert worker.main([CELL.preset, CELL.workload, CELL.mode]) == worker.EXIT_NOT_KEPT
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"not kept in {tmp_path}") and last.endswith("No space left on device")


class Workers:
    """The runner's worker processes, faked: each measurement ends with `status` and `stderr`."""

    def __init__(self, status: int | None, stderr: str) -> None:
        self.status, self.stderr = status, stderr
        self.stopping = SimpleNamespace(is_set=lambda: False)

    def run(self, job: Job, gpu: int | None, argv: list[str], env: dict[str, str], timeout: float,
            stderr: Path) -> tuple[int | None, str]:
        return self.status, self.stderr


def _run_one(tmp_path: Path, workers: Workers) -> tuple[dict[str, Any] | None, CellStore]:
    cfg = RunConfig(store_root=tmp_path, machine="m", commit=COMMIT, device="cpu")
    store = CellStore(tmp_path, RunKey("m", COMMIT, "2.11.0"))
    start = Start(Job(CELL), gpu=None, cost=Cost(wall_s=1.0, lock_s=0.5, compile_s=0.0), reserve_bytes=0, at=0.0,
                  why="the one measurement")
    return pool._run_one(start, cfg, store, workers, tmp_path / "kernels"), store  # type: ignore[arg-type]


def test_a_measurement_not_kept_stops_the_run_and_records_no_failure(tmp_path: Path) -> None:
    with pytest.raises(NotKept, match=r"tiny llm_rmsnorm eager was measured but not kept in /x: No space left on "
                                      r"device; the run stopped, what was measured before is kept"):
        _run_one(tmp_path, Workers(worker.EXIT_NOT_KEPT, "compiling\nnot kept in /x: No space left on device"))
    assert not list(tmp_path.rglob("*.json"))  # no failed cell that a later run would not measure again


def test_a_failure_the_store_cannot_keep_stops_the_run_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(atomic, "write_text", disk_full)
    with pytest.raises(NotKept, match=r"tiny llm_rmsnorm eager failed, and its failure was not kept in .*: No space "
                                      r"left on device"):
        _run_one(tmp_path, Workers(1, "Traceback\nRuntimeError: boom"))


def test_a_cell_that_failed_is_still_a_failed_cell(tmp_path: Path) -> None:
    result, store = _run_one(tmp_path, Workers(1, "Traceback\nRuntimeError: boom"))
    assert result is not None and result.status == "failed" and result.reason.endswith("RuntimeError: boom")
    assert store.replicate(*CELL.__dict__.values()) == result


def test_not_kept_is_the_tools_error_one_line_exit_1(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    def run(args: Any) -> int:
        raise NotKept("tiny llm_rmsnorm eager was measured but not kept in /x: No space left on device")

    monkeypatch.setitem(cli.COMMANDS, "run", run)
    assert cli.main(["run", "--preset", "tiny"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("compile-baselines run: error: tiny llm_rmsnorm eager was measured")


@contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir(parents=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                      capture_output=True).returncode != 0:
        pytest.skip("this host does not let a test mount a tmpfs")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


@pytest.mark.slow
def test_a_real_full_disk_stops_the_run_and_keeps_what_was_measured(tmp_path: Path) -> None:
    from tracker.measure.harness import Settings
    from tracker.store.cells import torch_version

    with tmpfs(tmp_path / "full", "64k") as full:
        cfg = RunConfig(store_root=full, machine="m", commit=COMMIT, device="cpu",
                        settings=Settings(warmup_ms=1, rep_ms=20, warmup_calls=1))
        store = CellStore(full, RunKey("m", COMMIT, torch_version()))
        kept = {"preset": "tiny", "workload": "diff_cfg_blend", "mode": "eager", "status": "skipped",
                "reason": "measured before"}
        store.put(CellResult.from_json(kept))
        free = os.statvfs(full)
        (full / "filler").write_bytes(b"\0" * (free.f_bavail * free.f_frsize))  # no measurement fits any more
        with pytest.raises(NotKept, match="No space left on device"):
            pool.measure_cells([CELL], cfg, store, pool.Progress(1, sys.stderr))
        assert store.replicate(CELL.preset, CELL.workload, CELL.mode) is None
        assert store.replicate("tiny", "diff_cfg_blend", "eager").to_json() == kept | {"replicate": 1}


# ---------------------------------------------------------------------------------------------------- merge


def _deny(monkeypatch: pytest.MonkeyPatch, denied: Path) -> None:
    """os.access says `denied` cannot be written, as for another user's folder or a read-only mount."""
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != denied and real(path, mode, **kw))


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    """A destination holding an earlier merge of machine h100-d: its results and its cells."""
    out = tmp_path / "dest"
    (out / "results").mkdir(parents=True)
    shutil.copytree(AA2 / "results" / "h100-d", out / "results" / "h100-d")
    shutil.copytree(AA2 / "cells" / "h100-d", out / "cells" / "h100-d")
    return out


def _merge(dest: Path) -> int:
    return cli.main(["merge", str(AA2 / "results"), "--results-dir", str(dest / "results"), "--cells-dir",
                     str(AA2 / "cells"), "--dest-cells-dir", str(dest / "cells")])


@pytest.mark.parametrize("where", ["a machine's results folder", "the cell store", "a folder inside a run's cells"])
def test_merge_refuses_before_writing_when_a_folder_it_writes_into_is_not_writable(
        dest: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], where: str) -> None:
    record = next(p for p in (dest / "cells" / "h100-d").rglob("*.json") if p.name != "launch-floor.json")
    record.unlink()  # the merge carries it back, into its folder
    denied = {"a machine's results folder": dest / "results" / "h100-d",  # the run of h100-d merged again
              "the cell store": dest / "cells",  # where h100-c's cells go
              "a folder inside a run's cells": record.parent}[where]
    _deny(monkeypatch, denied)
    before = tree(dest)
    assert _merge(dest) == 1
    err = capsys.readouterr().err
    assert err == (f"compile-baselines merge: error: cannot merge into {dest / 'results'}: {denied} is not writable "
                   "(permissions or a read-only file system); nothing was merged\n")
    assert tree(dest) == before  # not even the other machine, h100-c, was written


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    if subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True).returncode != 0:
        pytest.skip("this host does not let a test bind-mount")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("this host does not let a test remount read-only")
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_merge_refuses_a_real_read_only_machine_folder_before_writing_anything(
        dest: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = dest / "results" / "h100-d"
    before = tree(dest)
    with read_only(folder):
        assert _merge(dest) == 1
    assert f"{folder} is not writable" in capsys.readouterr().err
    assert tree(dest) == before


def test_a_merge_the_disk_stops_half_way_names_what_it_merged_and_merging_again_finishes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real = asvfiles.save_results
    saved: list[Path] = []

    def save(conf: Any, results: Any, entry: dict[str, str], *args: Any) -> Path:
        if saved:
            raise asvfiles.AsvError(f"cannot write results into {conf.results_dir}: No space left on device")
        saved.append(real(conf, results, entry, *args))
        return saved[-1]

    monkeypatch.setattr(asvfiles, "save_results", save)
    out = tmp_path / "results"
    with pytest.raises(merge.MergeError) as e:
        merge.merge_results([AA2 / "results"], out, cells_dirs=[])
    assert f"No space left on device; merged before it, complete: {saved[0]}; merge again to finish" in str(e.value)
    monkeypatch.setattr(asvfiles, "save_results", real)
    assert len(merge.merge_results([AA2 / "results"], out, cells_dirs=[])) == 2
    assert {p.parent.name for p in out.glob("*/*.json") if p.name != "machine.json"} == {"h100-c", "h100-d"}


def test_unwritable_names_the_folder_that_blocks_a_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "file").write_text("x")
    assert atomic.unwritable([tmp_path / "a" / "new" / "deeper" / "f.json"]) is None
    assert atomic.unwritable([tmp_path / "file" / "f.json"]) == tmp_path / "file"  # a file where a folder must be
    _deny(monkeypatch, tmp_path / "a")
    assert atomic.unwritable([tmp_path / "ok.json", tmp_path / "a" / "new" / "f.json"]) == tmp_path / "a"
