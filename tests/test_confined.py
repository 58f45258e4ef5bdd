"""Nothing under a results directory or a cell store is read, written or deleted through a link, and no FIFO there is
opened: each reader leaves such an entry out with one warning line, each writer refuses it in one line, and what lies
outside the directory is never touched (tracker.store.confined, the one guard every path goes through)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tracker import cli
from tracker.measure.cellresult import CellResult
from tracker.store import asvfiles, atomic, confined, merge, results
from tracker.store.cells import CellStore, RunKey, default_cells_dir

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "cpu-tiny" / "results"  # two real runs of machine cpu-laptop
RUN_A = "cpu-laptop/5d800df4-existing-py_work_venv_bin_python3.json"
RUN_B = "cpu-laptop/bc844535-existing-py_work_venv_bin_python3.json"
KEY = RunKey("cpu-laptop", "5d800df4bad6f855dd4208d2a080d087f3fe364e", "2.13.0+cpu")  # RUN_A's run
CELL = {"preset": "tiny", "workload": "llm_rmsnorm", "mode": "eager", "status": "failed", "reason": "a test"}


def snapshot(root: Path) -> list[tuple[str, bytes]]:
    return sorted((str(p.relative_to(root)), p.read_bytes()) for p in root.rglob("*") if p.is_file())


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside every root, holding a secret and a real run (what a link would lead a reader to)."""
    out = tmp_path / "outside"
    (out / "cpu-laptop").mkdir(parents=True)
    (out / "secret.txt").write_text("the runner's secret")
    shutil.copy(TINY / RUN_B, out / RUN_B)
    return out


def one_run(tmp_path: Path, name: str = "results") -> Path:
    """A results directory holding RUN_A and its machine.json."""
    d = tmp_path / name / "cpu-laptop"
    d.mkdir(parents=True)
    shutil.copy(TINY / RUN_A, tmp_path / name / RUN_A)
    shutil.copy(TINY / "cpu-laptop" / "machine.json", d / "machine.json")
    return tmp_path / name


# --- the guard --------------------------------------------------------------------------------------------------


def test_the_guard_finds_the_first_link_or_special_file_below_the_root_and_nothing_else(tmp_path: Path) -> None:
    root = tmp_path / "real"
    (root / "m").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", root / "linked")
    os.mkfifo(root / "m" / "pipe.json")
    os.symlink(root, tmp_path / "root-link")  # the root itself may be a link
    assert str(confined.problem(root, root / "linked" / "x.json")) == (
        f"{root / 'linked'} is a symlink, which is never followed")
    assert str(confined.problem(root, root / "m" / "pipe.json")) == (
        f"{root / 'm' / 'pipe.json'} is a FIFO, which is never opened")
    assert "climbs out" in str(confined.problem(root, root / "m" / ".." / ".." / "x"))
    assert "not under" in str(confined.problem(root, tmp_path / "elsewhere" / "x"))
    assert confined.problem(root, root / "m" / "not-yet" / "x.json") is None
    assert confined.problem(tmp_path / "root-link", tmp_path / "root-link" / "m") is None
    with pytest.raises(OSError, match="is a symlink"):
        confined.check(root, root / "linked")


def test_a_listing_never_enters_a_link_and_warns_once_for_each(tmp_path: Path, outside: Path) -> None:
    root = one_run(tmp_path)
    os.symlink(outside / "cpu-laptop", root / "other-machine")
    os.symlink(outside / RUN_B, root / RUN_B)
    os.mkfifo(root / "cpu-laptop" / "aaaaaaaa-fifo.json")
    said: list[str] = []
    assert confined.files(root, "*/*.json", said.append) == [root / RUN_A, root / "cpu-laptop" / "machine.json"]
    assert said == [f"skipped {root / 'cpu-laptop' / 'aaaaaaaa-fifo.json'}: a FIFO, which is never opened",
                    f"skipped {root / RUN_B}: a symlink, which is never followed",
                    f"skipped {root / 'other-machine'}: a symlink, which is never followed"]


def test_a_read_refuses_a_link_a_fifo_and_a_file_larger_than_it_can_be(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    os.symlink(outside / "secret.txt", root / "machine.json")
    os.mkfifo(root / "benchmarks.json")
    (root / "big.json").write_bytes(b" " * 1025)
    for name, why in (("machine.json", "is a symlink"), ("benchmarks.json", "is a FIFO")):
        with pytest.raises(OSError, match=why):
            confined.read_text(root, root / name)  # returns at once: a FIFO would block an open()
    with pytest.raises(OSError, match="larger than"):
        confined.read_text(root, root / "big.json", limit=1024)


def test_a_lock_file_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    os.symlink(tmp_path / "created-elsewhere", tmp_path / ".lock")
    with pytest.raises(atomic.LockError), atomic.locked(tmp_path / ".lock"):
        pass
    assert not (tmp_path / "created-elsewhere").exists()


# --- a results directory ----------------------------------------------------------------------------------------


def test_readers_of_results_leave_out_links_and_fifos_with_one_warning_each(
        tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = one_run(tmp_path)
    os.symlink(outside / RUN_B, root / RUN_B)  # a run of the same machine, from outside
    os.mkfifo(root / "cpu-laptop" / "cccccccc-env.json")
    runs, warnings = results.list_runs(root)
    assert [r.path for r in runs] == [root / RUN_A]
    assert warnings == [f"skipped {root / RUN_B}: a symlink, which is never followed",
                        f"skipped {root / 'cpu-laptop' / 'cccccccc-env.json'}: a FIFO, which is never opened"]
    assert cli.main(["summary", "--results-dir", str(root), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert [r["commit"][:8] for r in json.loads(out)["runs"]] == ["5d800df4"]
    assert err.count("warning: skipped") == 2


def test_results_that_are_only_links_say_so(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "results"
    root.mkdir()
    os.symlink(outside / "cpu-laptop", root / "cpu-laptop")
    with pytest.raises(results.ResultsError, match=r"no asv result files in .*cpu-laptop: a symlink"):
        results.list_runs(root)


def test_merge_leaves_out_a_linked_source_and_refuses_a_linked_destination(
        tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = one_run(tmp_path, "src")
    os.symlink(outside / RUN_B, src / RUN_B)
    merge.merge_results([src], tmp_path / "dest")
    assert sorted(p.name for p in (tmp_path / "dest" / "cpu-laptop").iterdir()) == [Path(RUN_A).name,
                                                                                     "machine.json"]
    assert "warning: skipped" in capsys.readouterr().err
    before = snapshot(outside)
    linked = tmp_path / "linked-dest"
    linked.mkdir()
    os.symlink(outside / "cpu-laptop", linked / "cpu-laptop")
    with pytest.raises(merge.MergeError, match=r"cpu-laptop is a symlink, which is never followed; nothing was merged"):
        merge.merge_results([src], linked)
    assert snapshot(outside) == before


def test_recording_into_a_machine_folder_that_is_a_link_is_refused(tmp_path: Path, outside: Path) -> None:
    from asv.results import Results

    dest = tmp_path / "dest"
    dest.mkdir()
    os.symlink(outside / "cpu-laptop", dest / "cpu-laptop")
    (outside / "cpu-laptop" / ".staging-dead").mkdir()  # would be swept, were the link entered
    before = snapshot(outside)
    conf = type("Conf", (), {"results_dir": str(dest)})()
    with pytest.raises(asvfiles.AsvError, match="is a symlink, which is never followed"):
        asvfiles.save_results(conf, Results.load(str(TINY / RUN_A)), {"machine": "cpu-laptop"})
    assert snapshot(outside) == before and (outside / "cpu-laptop" / ".staging-dead").is_dir()


# --- a cell store -----------------------------------------------------------------------------------------------


def test_a_cell_record_that_is_a_link_reads_as_damaged_and_is_measured_again(tmp_path: Path, outside: Path) -> None:
    (outside / "cell.json").write_text(json.dumps(CELL))
    store = CellStore(tmp_path / "cells", KEY)
    link = store.path("tiny", "llm_rmsnorm", "eager")
    link.parent.mkdir(parents=True)
    os.symlink(outside / "cell.json", link)
    assert store.get("tiny", "llm_rmsnorm", "eager") is None
    assert store.unusable("tiny", "llm_rmsnorm", "eager") == "a symlink, which is never followed"
    store.put(CellResult.from_json(CELL))  # measured again: the record replaces the link, the file outside is unchanged
    assert not link.is_symlink() and store.get("tiny", "llm_rmsnorm", "eager").reason == "a test"
    assert json.loads((outside / "cell.json").read_text()) == CELL


def test_a_cell_store_whose_folder_is_a_link_is_never_written_through(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "cells"
    root.mkdir()
    os.symlink(outside, root / "cpu-laptop")
    store = CellStore(root, KEY)
    with pytest.raises(OSError, match="is a symlink"):
        store.put(CellResult.from_json(CELL))
    with pytest.raises(OSError, match="is a symlink"):
        store.set_launch_floor(3.0)
    assert store.all() == [] and list(outside.rglob("*.json")) == [outside / RUN_B]


def test_merge_never_carries_a_cell_record_whose_names_climb_out_of_the_store(tmp_path: Path) -> None:
    src = one_run(tmp_path, "src")
    source = CellStore(default_cells_dir(src), KEY)
    source.put(CellResult.from_json(CELL))
    hostile = source.dir / "tiny" / "llm_rmsnorm" / "default.json"
    hostile.write_text(json.dumps({**CELL, "preset": "../../../../escaped", "mode": "default"}))
    merge.merge_results([src], tmp_path / "dest" / "results")
    carried = CellStore(tmp_path / "dest" / "cells", KEY)
    assert [c.mode for c in carried.all()] == ["eager"]  # the well-named record came along, the other did not
    assert not list(tmp_path.rglob("escaped*"))
    with pytest.raises(ValueError, match="does not name a folder"):
        CellStore(tmp_path / "c", KEY).path("..", "x", "eager")


def test_rm_refuses_cells_reached_through_a_link_and_deletes_nothing_outside(
        tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = one_run(tmp_path)
    cells = default_cells_dir(root)
    cells.mkdir()
    theirs = outside / "cells-of-another" / KEY.commit / f"torch-{KEY.torch}"
    theirs.mkdir(parents=True)
    (theirs / "keep.json").write_text("{}")
    os.symlink(outside / "cells-of-another", cells / "cpu-laptop")
    assert cli.main(["rm", "--results-dir", str(root), "--commit", "5d800df4", "--yes"]) == 1
    assert "is a symlink, which is never followed; nothing was removed" in capsys.readouterr().err
    assert (theirs / "keep.json").exists() and (root / RUN_A).exists()


def test_a_fifo_among_the_results_never_blocks_a_command(tmp_path: Path) -> None:
    root = one_run(tmp_path)
    os.mkfifo(root / "cpu-laptop" / "dddddddd-env.json")
    os.mkfifo(root / "benchmarks.json")
    done = subprocess.run([sys.executable, "-m", "tracker.cli", "summary", "--results-dir", str(root)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "dddddddd-env.json: a FIFO, which is never opened" in done.stderr


def test_a_hard_link_in_a_destination_is_replaced_never_written_through(tmp_path: Path, outside: Path) -> None:
    (outside / "kept.json").write_bytes((TINY / RUN_A).read_bytes())
    dest = one_run(tmp_path, "dest")
    (dest / RUN_A).unlink()
    os.link(outside / "kept.json", dest / RUN_A)
    merge.merge_results([one_run(tmp_path, "src")], dest)
    assert (outside / "kept.json").read_bytes() == (TINY / RUN_A).read_bytes()
    assert os.stat(dest / RUN_A).st_nlink == 1


def test_a_result_file_larger_than_one_can_be_is_skipped_with_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracker.store import asvjson

    root = one_run(tmp_path)
    shutil.copy(TINY / RUN_B, root / RUN_B)
    monkeypatch.setattr(asvjson, "MAX_RESULT_BYTES", (root / RUN_B).stat().st_size - 1)  # RUN_A is smaller
    loaded = results.load_results(root)
    assert set(loaded.table["commit"].str[:8]) == {"5d800df4"}
    assert any(RUN_B in w and "larger than" in w for w in loaded.warnings), loaded.warnings
