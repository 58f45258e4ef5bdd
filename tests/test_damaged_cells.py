"""A stored measurement that no measurement could have given (an impossible latency, samples that are not numbers,
an unknown status, a failure without its reason) never stands for its cell: the combine of replicates leaves it out
and says so, the store hands it to nobody, and `run` names its file and measures it again. From real cells of the
H100 (tests/fixtures/h100-aa2) and a real CPU run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tracker.measure.cellresult import CellResult
from tracker.runner.config import RunConfig
from tracker.runner.plan import CellId
from tracker.runner.remaining import pending
from tracker.store import asvfiles
from tracker.store.cells import CellStore, RunKey, combine, problem

ROOT = Path(__file__).resolve().parent.parent
CELLS = ROOT / "tests" / "fixtures" / "h100-aa2" / "cells" / "h100-c"
CELL = ("prefill", "diff_unet_resblock", "max-autotune-no-cudagraphs")


def real(replicate: int = 1) -> dict[str, Any]:
    suffix = "" if replicate == 1 else f"@{replicate}"
    (path,) = CELLS.glob(f"*/torch-*/{CELL[0]}/{CELL[1]}/{CELL[2]}{suffix}.json")
    return json.loads(path.read_text())


def _without(key: str) -> Any:
    return lambda c: {k: v for k, v in c.items() if k != key}


DAMAGE = {
    "negative median": lambda c: {**c, "median_ms": -1.0},
    "zero median": lambda c: {**c, "median_ms": 0.0},
    "NaN median": lambda c: {**c, "median_ms": math.nan},
    "infinite median": lambda c: {**c, "median_ms": math.inf},
    "absurd median": lambda c: {**c, "median_ms": 1e308},
    "median as text": lambda c: {**c, "median_ms": "0.5"},
    "median as a boolean": lambda c: {**c, "median_ms": True},
    "samples as text": lambda c: {**c, "samples_ms": "0.1 0.2"},
    "no samples": _without("samples_ms"),
    "empty samples": lambda c: {**c, "samples_ms": []},
    "a negative sample": lambda c: {**c, "samples_ms": [*c["samples_ms"], -0.5]},
    "a NaN sample": lambda c: {**c, "samples_ms": [math.nan, *c["samples_ms"]]},
    "no compile time": _without("compile_s"),
    "negative compile time": lambda c: {**c, "compile_s": -3.0},
    "launch floor as text": lambda c: {**c, "launch_us": "4.6"},
    "unknown status, no reason": lambda c: {k: v for k, v in {**c, "status": "weird"}.items() if k != "reason"},
    "failed without a reason": lambda c: {k: v for k, v in {**c, "status": "failed"}.items() if k != "reason"},
    "skipped with a reason of null": lambda c: {**c, "status": "skipped", "reason": None},
    "not an object": lambda c: [c],
}


# A record that is no JSON object never becomes a CellResult (the store reads it as damaged, below).
RECORDS = [d for d in DAMAGE if d != "not an object"]


def test_a_record_that_is_no_object_is_no_cell_result() -> None:
    with pytest.raises(ValueError, match="a list, not a measurement"):
        CellResult.from_json(DAMAGE["not an object"](real(1)))


@pytest.mark.parametrize("damage", RECORDS)
def test_a_damaged_replicate_never_stands_for_its_cell_and_is_reported(damage: str) -> None:
    good, bad = real(1), DAMAGE[damage]({**real(2), "median_ms": real(1)["median_ms"] / 2})
    assert problem(good) is None and problem(bad)
    combined = combine([CellResult.from_json(good), CellResult.from_json(bad)])
    assert combined.status == "ok" and combined.median_ms == good["median_ms"]
    assert combined.compiles_ms == [good["median_ms"]] and combined.replicates_failed == 1
    assert combined.rejected == [f"replicate 2: {problem(bad)}"]


@pytest.mark.parametrize("damage", RECORDS)
def test_a_cell_with_only_damaged_replicates_is_failed_saying_why(damage: str) -> None:
    bad = DAMAGE[damage](real(1))
    combined = combine([CellResult.from_json(bad)])
    assert combined.status == "failed" and combined.reason == f"damaged record: replicate 1: {problem(bad)}"
    with pytest.raises(asvfiles.CellFailed):  # recorded as asv's failure, never as a value
        asvfiles.metric_value(combined, "latency")


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_the_store_hands_a_damaged_record_to_nobody_and_a_run_measures_it_again(tmp_path: Path, damage: str) -> None:
    store = CellStore(tmp_path, RunKey("h100-c", "7" * 40, "2.11.0+cu130"))
    store.put(CellResult.from_json(real(1)))
    path = store.path(*CELL)
    path.write_text(json.dumps(DAMAGE[damage](real(1)), allow_nan=True))
    assert store.replicate(*CELL) is None and store.get(*CELL) is None
    assert store.damaged() == [(path, problem(DAMAGE[damage](real(1))))]
    assert store.unusable(*CELL) == problem(DAMAGE[damage](real(1)))
    cfg = RunConfig(store_root=tmp_path, machine="h100-c", commit="7" * 40, replicates=1)
    assert [j.cell for j in pending([CellId(*CELL)], cfg, store)] == [CellId(*CELL)]


def test_a_record_filed_under_another_cell_s_path_is_not_that_cell(tmp_path: Path) -> None:
    store = CellStore(tmp_path, RunKey("h100-c", "7" * 40, "2.11.0+cu130"))
    store.put(CellResult.from_json(real(1)))
    store.path(*CELL).write_text(json.dumps({**real(1), "workload": "llm_rmsnorm"}))
    assert store.replicate(*CELL) is None
    assert "not the cell its path names" in store.unusable(*CELL)


def test_the_real_stored_cells_are_all_usable() -> None:
    fixtures = ROOT / "tests" / "fixtures"
    records = [json.loads(p.read_text()) for p in fixtures.glob("*/cells/**/*.json") if p.name != "launch-floor.json"]
    assert len(records) > 3000 and [problem(r) for r in records if problem(r)] == []


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    return dict(os.environ, HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))


@pytest.mark.slow
def test_run_names_each_damaged_cell_s_file_and_measures_it_again(tmp_path: Path, env: dict[str, str]) -> None:
    """Two real CPU cells, each damaged a way that stopped `run` with a traceback or a missing key before."""
    res, cells = tmp_path / "results", tmp_path / "cells"
    argv = [sys.executable, "-m", "tracker.cli", "run", "--results-dir", str(res), "--cells-dir", str(cells),
            "--machine", "cpu-box", "--workload", "llm_rmsnorm", "diff_cfg_blend", "--mode", "eager", "--kernel",
            "none", "--warmup-ms", "5", "--rep-ms", "20", "--commit", "d" * 40]
    first = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    damaged = {}
    for workload, damage in (("llm_rmsnorm", "samples as text"), ("diff_cfg_blend", "unknown status, no reason")):
        (path,) = cells.glob(f"*/*/*/tiny/{workload}/eager.json")
        path.write_text(json.dumps(DAMAGE[damage](json.loads(path.read_text())), allow_nan=True))
        damaged[workload] = path
    again = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    for workload, path in damaged.items():
        assert f"warning: {path}: " in again.stderr and f"tiny {workload} eager: ok" in again.stderr
        assert problem(json.loads(path.read_text())) is None
    assert "2 cells: 2 ok, 0 failed" in again.stdout
