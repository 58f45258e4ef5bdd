"""Every stored format is versioned, and every generation of it that was ever written reads through today's code in
today's shape (tracker/store/formats.py): the cell store's records of H100 and CPU runs from before the version field
(generation 1) and as written now, the summary and comparison JSON of generation 1 (tests/fixtures/formats-gen1) and
now, the paired record of generation 1 (an H100 trial) and now. A file of a newer format than the tool knows is one
error line, exit 1, and stays as it was."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tracker.analyse.compare import compare_runs
from tracker.errors import EXIT_FAILED, ToolError
from tracker.publish.comparison import comparison_json
from tracker.publish.summary import render, summary_for
from tracker.runner.config import RunConfig
from tracker.runner.plan import CellId
from tracker.runner.remaining import pending
from tracker.store import formats, pairing
from tracker.store.cells import LAUNCH_FLOOR, CellStore, RunKey, problem
from tracker.store.merge import merge_results

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
GEN1 = FIXTURES / "formats-gen1"  # its PROVENANCE.md: the commands that wrote each file

# Cell stores of generation 1 (no version field) in the shapes they had over time: a CPU run from before replicates
# (2026-11-22), H100 cold compiles from before replicates (2026-11-23), an H100 run with replicates, an H100x4 run
# with the timeline's fields (each fixture's PROVENANCE.md)
CELL_STORES = {
    "cpu-kernels": FIXTURES / "cpu-kernels" / "cells",
    "h100-compiles": FIXTURES / "h100-compiles" / "rep5",
    "h100-aa": FIXTURES / "h100-aa" / "cells",
    "h100x4-a": FIXTURES / "h100x4-a" / "cells",
}


def _records(root: Path, most: int = 30) -> list[tuple[CellStore, tuple[str, str, str, int], Path]]:
    """Up to `most` record files of the store under `root`, each with its store and the cell its path names (the
    mode as its record says: a kernel's mode, `kernel:NAME`, is filed as `kernel_NAME`)."""
    out = []
    for path in sorted(root.glob("*/*/torch-*/*/*/*.json"))[:most]:
        machine, commit, torch, preset, workload = path.parts[-6:-1]
        replicate = int(path.stem.partition("@")[2] or 1)
        store = CellStore(root, RunKey(machine, commit, torch.removeprefix("torch-")))
        where = (preset, workload, json.loads(path.read_text())["mode"], replicate)
        assert store.path(*where) == path
        out.append((store, where, path))
    return out


@pytest.mark.parametrize("fixture", list(CELL_STORES))
def test_a_generation_1_cell_record_reads_in_today_s_shape(fixture: str) -> None:
    records = _records(CELL_STORES[fixture])
    assert records
    for store, where, path in records:
        stored = json.loads(path.read_text())
        assert formats.KEY not in stored  # written before the version field: generation 1
        cell = store.replicate(*where)
        assert cell is not None and problem(cell.to_json(), where) is None
        # every record names its replicate (the one its path names); the rest is what the file holds
        record = cell.to_json()
        assert cell.replicate == where[3] and formats.KEY not in record
        assert {k: v for k, v in record.items() if k != "replicate"} == {k: v for k, v in stored.items()
                                                                        if k != "replicate"}


@pytest.mark.parametrize("fixture", list(CELL_STORES))
def test_a_cell_written_now_carries_the_current_version_and_reads_back_the_same(fixture: str,
                                                                                tmp_path: Path) -> None:
    store, where, _ = _records(CELL_STORES[fixture], 1)[0]
    old = store.replicate(*where)
    assert old is not None
    mine = CellStore(tmp_path, store.key)
    mine.put(old)
    written = json.loads(mine.path(*where).read_text())
    assert next(iter(written)) == formats.KEY and written[formats.KEY] == formats.CELL.current
    assert mine.replicate(*where) == old and mine.all() == [old]


def test_a_measurement_that_names_no_replicate_is_stored_as_the_first() -> None:
    (_, _, path), = [r for r in _records(CELL_STORES["cpu-kernels"]) if r[1][2] == "eager"]
    stored = json.loads(path.read_text())
    assert "replicate" not in stored
    assert formats.CELL.read(stored, str(path)) == {**stored, "replicate": 1}


def _newer(path: Path) -> bytes:
    """Mark the stored document in `path` as written by a newer version of the tool; its bytes as they now are."""
    data = json.loads(path.read_text())
    fmt = formats.PAIRED if path.name.startswith("paired-") else formats.LAUNCH_FLOOR if path.name == LAUNCH_FLOOR \
        else formats.CELL
    path.write_text(json.dumps({**data, formats.KEY: fmt.current + 1}))
    return path.read_bytes()


def _cpu_kernels(tmp_path: Path) -> tuple[Path, CellStore, tuple[str, str, str, int], Path]:
    """A copy of the CPU run with kernels under test and the record of its failed (incorrect) kernel."""
    shutil.copytree(FIXTURES / "cpu-kernels", tmp_path / "run")
    (store, where, path), = [r for r in _records(tmp_path / "run" / "cells") if r[1][2] == "kernel:wrong_no_norm"]
    return tmp_path / "run", store, where, path


def test_a_cell_of_a_newer_format_is_never_measured_again_nor_overwritten(tmp_path: Path) -> None:
    _, store, where, path = _cpu_kernels(tmp_path)
    before = _newer(path)
    newer = f"{path}: cell record format {formats.CELL.current + 1} is newer"
    with pytest.raises(formats.FormatTooNew, match=re.escape(newer)):
        store.replicate(*where)
    for read in (store.all, store.damaged, lambda: store.unusable(*where)):
        with pytest.raises(formats.FormatTooNew):
            read()
    cfg = RunConfig(store_root=store.root, machine=store.key.machine, commit=store.key.commit, replicates=1)
    with pytest.raises(formats.FormatTooNew):
        pending([CellId(*where[:3])], cfg, store)
    with pytest.raises(formats.FormatTooNew):
        merge_results([tmp_path / "run" / "results"], tmp_path / "merged")
    assert path.read_bytes() == before and not [p for p in (tmp_path / "merged").rglob("*") if p.is_file()]


def test_summary_over_a_cell_of_a_newer_format_is_one_error_line_and_exit_1(
        tmp_path: Path, cli_run: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run, _, _, path = _cpu_kernels(tmp_path)
    before = _newer(path)
    assert cli_run(["summary", "--results-dir", str(run / "results")]) == EXIT_FAILED
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "newer than this tool reads" in err and str(path) in err
    assert path.read_bytes() == before


@pytest.mark.parametrize("fixture", ["h100-aa", "h100x4-a"])
def test_a_generation_1_launch_floor_reads_and_one_written_now_carries_its_version(fixture: str,
                                                                                  tmp_path: Path) -> None:
    store, _, _ = _records(CELL_STORES[fixture], 1)[0]
    stored = json.loads((store.dir / LAUNCH_FLOOR).read_text())
    assert formats.KEY not in stored and store.launch_floor() == stored["launch_us"]
    mine = CellStore(tmp_path, store.key)
    assert mine.set_launch_floor(stored["launch_us"]) == stored["launch_us"] == mine.launch_floor()
    assert json.loads((mine.dir / LAUNCH_FLOOR).read_text()) == {formats.KEY: formats.LAUNCH_FLOOR.current,
                                                                  "launch_us": stored["launch_us"]}
    path = mine.dir / LAUNCH_FLOOR
    before = _newer(path)
    for read in (mine.launch_floor, lambda: mine.set_launch_floor(1.0)):
        with pytest.raises(formats.FormatTooNew, match="launch floor format"):
            read()
    assert path.read_bytes() == before


# ------------------------------------------------------------------------------------------ summary and comparison


def _same_fields(old: dict[str, Any], new: dict[str, Any], where: str) -> None:
    """`old` has exactly the fields `new` has, and so has each object and list item below them whose fields are the
    writer's (not the data's: a dict keyed by workload or mode differs with the runs)."""
    assert set(old) == set(new), where
    for key, value in new.items():
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()) and \
                isinstance(old[key], dict) and old[key]:
            for a in old[key].values():
                _same_fields(a, next(iter(value.values())), f"{where}.{key}.*")
        elif isinstance(value, list) and value and isinstance(value[0], dict) and old[key]:
            for a in old[key]:
                _same_fields(a, value[0], f"{where}.{key}[]")


SUMMARIES = {  # generation 1 file -> the results it was written from
    "summary-h100-smoke.json": FIXTURES / "h100-smoke" / "results",
    "summary-cpu-kernels.json": FIXTURES / "cpu-kernels" / "results",
}


@pytest.mark.parametrize("name", list(SUMMARIES))
def test_a_generation_1_summary_reads_in_today_s_shape(name: str) -> None:
    stored = json.loads((GEN1 / name).read_text())
    assert formats.KEY not in stored
    old = formats.SUMMARY.read(stored, name)
    now, _ = summary_for(SUMMARIES[name])
    assert now[formats.KEY] == formats.SUMMARY.current
    now = formats.SUMMARY.read(now, "today's summary")
    # the same runs, each with the presets it measured, and every field today's writer gives, at every level
    assert [(r["commit"], r["machine"], r["torch"], sorted(r["presets"])) for r in old["runs"]] == [
        (r["commit"], r["machine"], r["torch"], sorted(r["presets"])) for r in now["runs"]]
    _same_fields(old, now, name)
    for run in old["runs"]:
        for p in run["presets"].values():
            assert p["instances"] == len(p["winners"]) and sum(p["wins"].values()) == p["instances"]


def test_today_s_summary_json_reads_back_as_written() -> None:
    now, _ = summary_for(SUMMARIES["summary-cpu-kernels.json"])
    text = render(now, "json")
    assert next(iter(json.loads(text).items())) == (formats.KEY, formats.SUMMARY.current)
    assert formats.SUMMARY.read(json.loads(text), "summary") == {k: v for k, v in now.items() if k != formats.KEY}


COMPARISONS = {  # generation 1 file -> (results, base, head) it was written from
    "compare-h100-pr-plant.json": (FIXTURES / "h100-pr-plant" / "results", "41112f5", "43e5053"),
    "compare-cpu-tiny.json": (FIXTURES / "cpu-tiny" / "results", "5d800df4", "bc844535"),
}


@pytest.mark.parametrize("name", list(COMPARISONS))
def test_a_generation_1_comparison_reads_in_today_s_shape(name: str) -> None:
    stored = json.loads((GEN1 / name).read_text())
    assert formats.KEY not in stored
    old = formats.COMPARISON.read(stored, name)
    results, base, head = COMPARISONS[name]
    written = comparison_json(compare_runs(results, base, head))
    assert next(iter(written)) == formats.KEY and written[formats.KEY] == formats.COMPARISON.current
    now = formats.COMPARISON.read(written, "today's comparison")
    assert old["base"]["commit"].startswith(base) and old["head"]["commit"].startswith(head)
    assert (old["base"], old["head"]) == (now["base"], now["head"])
    _same_fields(old, now, name)
    assert old["summary"]["cells"] == len(old["cells"]) and old["summary"]["instances"] == len(old["instances"])


# ----------------------------------------------------------------------------------------------- paired record

PAIRED_GEN1 = next((FIXTURES / "h100-plant-truth" / "t10" / "verdict" / "cells").glob("*/*/*/paired-*.json"))


def test_a_generation_1_paired_record_reads_with_no_shared_baseline_and_writes_back_as_today_s(tmp_path: Path) -> None:
    cells = FIXTURES / "h100-plant-truth" / "t10" / "verdict" / "cells"
    stored = json.loads(PAIRED_GEN1.read_text())
    assert stored[formats.KEY] == 1
    record = pairing.read(cells, PAIRED_GEN1)
    assert record.shared is None and (record.machine, record.base, record.head) == (
        stored["machine"], stored["base"], stored["head"])
    assert {k: len(v) for k, v in record.cells.items()} == {k: len(v) for k, v in stored["cells"].items()}
    written = pairing.write(tmp_path, record)
    assert json.loads(written.read_text())[formats.KEY] == formats.PAIRED.current
    assert pairing.read(tmp_path, written) == record


def test_a_paired_record_of_a_newer_format_is_refused_and_kept(tmp_path: Path) -> None:
    shutil.copytree(PAIRED_GEN1.parents[3], tmp_path / "cells")
    path = tmp_path / "cells" / PAIRED_GEN1.relative_to(PAIRED_GEN1.parents[3])
    before = _newer(path)
    with pytest.raises(pairing.PairingError, match="newer than this tool reads"):
        pairing.read(tmp_path / "cells", path)
    assert path.read_bytes() == before


# ----------------------------------------------------------------------------------------------------- formats


@pytest.mark.parametrize("fmt", list(formats.FORMATS.values()), ids=list(formats.FORMATS))
def test_every_format_refuses_a_newer_version_or_none_with_one_tool_error(fmt: formats.Format) -> None:
    with pytest.raises(formats.FormatTooNew, match=f"f.json: {fmt.name} format {fmt.current + 1} is newer than "
                                                   f"this tool reads \\({fmt.current}\\): upgrade compile-baselines"):
        fmt.read({formats.KEY: fmt.current + 1}, "f.json")
    for bad in (0, "2", 1.5, True, None):
        with pytest.raises(formats.FormatError, match=r"no .* format version") as e:
            fmt.read({formats.KEY: bad}, "f.json")
        assert isinstance(e.value, ToolError) and not isinstance(e.value, formats.FormatTooNew)
    with pytest.raises(formats.FormatError, match="a list"):
        fmt.read([], "f.json")
    assert fmt.stamp({"a": 1, formats.KEY: 0}) == {formats.KEY: fmt.current, "a": 1}


def test_migrations_run_in_order_from_the_document_s_generation() -> None:
    steps = (lambda d: {**d, "seen": [*d.get("seen", []), 2]}, lambda d: {**d, "seen": [*d["seen"], 3]})
    fmt = formats.Format("constructed format", steps)
    assert fmt.current == 3
    assert fmt.read({"x": 1}, "f") == {"x": 1, "seen": [2, 3]}  # no version: generation 1
    assert fmt.read({formats.KEY: 2, "seen": [2]}, "f") == {"seen": [2, 3]}
    assert fmt.read({formats.KEY: 3, "seen": []}, "f") == {"seen": []}
    with pytest.raises(formats.FormatError, match="no constructed format format version"):
        formats.Format("constructed format", unversioned=False).read({}, "f")
