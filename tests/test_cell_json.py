"""A cell travels as a CellResult and is JSON only in the cell store's files: every committed cell-store record, of
every generation the H100 and CPU runs wrote, reads through `CellResult.from_json` and writes back through
`to_json` as the same JSON (keys, their order, numbers), and the store hands each one out typed."""

from __future__ import annotations

import json
from pathlib import Path

from tracker.measure.cellresult import MEASURED, CellResult
from tracker.store.cells import CellStore, RunKey, stored_form

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _records() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*.json") if "cells" in p.parts and p.name != "launch-floor.json"
                  and "paired-" not in p.name)


def test_every_committed_cell_record_round_trips_to_the_identical_json() -> None:
    records = _records()
    generations = {tuple(json.loads(p.read_text())) for p in records}
    assert len(records) > 6000 and len(generations) >= 8  # the field sets and key orders of every earlier writer
    for path in records:
        data = json.loads(path.read_text())
        again = CellResult.from_json(data).to_json()
        assert json.dumps(again, allow_nan=True) == json.dumps(data, allow_nan=True), path


def _written(data: object) -> str:
    return json.dumps(data, indent=1, allow_nan=True) + "\n"  # tracker.store.atomic.write_json's layout


def test_a_record_the_store_wrote_is_written_back_byte_for_byte() -> None:
    # the records kept as the store wrote them (others were compacted or sorted when committed)
    as_written = [p for p in _records() if _written(json.loads(p.read_text())) == p.read_text()]
    assert len(as_written) > 100
    for path in as_written:
        assert _written(CellResult.from_json(json.loads(path.read_text())).to_json()) == path.read_text(), path


def test_every_committed_cell_store_hands_out_typed_cells() -> None:
    stores = sorted({p.parents[2] for p in _records()})
    assert stores
    for run in stores:
        key = RunKey(run.parent.parent.name, run.parent.name, run.name.removeprefix("torch-"))
        store = CellStore(run.parent.parent.parent, key)
        assert store.dir == run
        records = store.all()
        assert records and all(isinstance(c, CellResult) and c.preset and c.status for c in records), run
        assert all(isinstance(c, CellResult) for c in store.cells())


def test_a_measured_cell_is_written_as_the_runner_has_always_written_it(tmp_path: Path) -> None:
    # the measured fields in their order, then n_samples and replicate, then where and when it ran
    cell = CellResult("tiny", "llm_rmsnorm", "eager", "cpu", "ok", samples_ms=[0.05] * 3, median_ms=0.05,
                      compile_s=0.0, wall_s=1.5)
    record = stored_form(cell)
    record.replicate, record.ended_at, record.gpu_index = 1, 12.5, "0"
    store = CellStore(tmp_path, RunKey("m", "a" * 40, "2.9.1"))
    store.put(record)
    data = json.loads(store.path("tiny", "llm_rmsnorm", "eager").read_text())
    assert list(data) == ["format", *MEASURED, "n_samples", "replicate", "ended_at", "gpu_index"]
    assert data["n_samples"] == 3 and data["lock_held_s"] is None
    assert store.replicate("tiny", "llm_rmsnorm", "eager") == record
