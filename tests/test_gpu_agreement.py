"""tools/gpu_agreement.py, the benchmark of `run --gpus`'s agreement goal: per-cell medians on n GPUs agree with a
one-GPU run as closely as two one-GPU runs agree with each other. Read on the real A/A pair of tests/fixtures/h100-aa2
(two one-GPU runs, before --gpus recorded the GPU), and on a constructed pair for the split per GPU."""

from __future__ import annotations

import importlib.util
import json
import shutil
import statistics
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tracker.store.cells import CellStore, RunKey
from tracker.store.results import list_runs, load_results

REPO = Path(__file__).resolve().parents[1]
AA = REPO / "tests" / "fixtures" / "h100-aa2"
COMMIT = "759ff183dcd5bdaec5fa61a7f55acb9f10b761ee"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_agreement", REPO / "tools" / "gpu_agreement.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _ok_cells(machine: str) -> dict[tuple[str, str, str], dict]:
    """The run's ok cells as its cell store holds them: a source apart from the result files the tool reads."""
    (run,) = [r for r in list_runs(AA / "results")[0] if r.machine == machine]
    store = CellStore.of_run(AA / "cells", RunKey(machine, COMMIT, run.torch))
    assert store is not None
    return {(c.preset, c.workload, c.mode): c.to_json() for c in store.cells() if c.status == "ok"}


def _medians(machine: str) -> dict[tuple[str, str, str], float]:
    t = load_results(AA / "results", machine=machine).table
    t = t[t["status"] == "ok"]
    return {(str(r.preset), str(r.workload), str(r.mode)): float(r.median_ms) for r in t.itertuples()}


def test_the_a_a_pair_agrees_over_the_cells_both_runs_measured(tool: ModuleType,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    runs, _ = list_runs(AA / "results")
    base, head = tool.pick(runs, "h100-c"), tool.pick(runs, f"h100-d@{COMMIT[:8]}")
    cells, _ = tool.measured(AA / "results", [base, head])
    a = tool.agreement(cells[base.path], cells[head.path])

    both = _ok_cells("h100-c").keys() & _ok_cells("h100-d").keys()
    assert a.in_common == a.overall.cells == len(both) > 0
    b, h = _medians("h100-c"), _medians("h100-d")
    deviations = [abs(h[k] / b[k] - 1) for k in both]
    assert a.overall.median == statistics.median(deviations)
    assert a.overall.max == max(deviations)
    assert a.overall.p90 == pytest.approx(float(np.percentile(deviations, 90)))
    assert a.overall.beyond == (sum(d > 0.05 for d in deviations), sum(d > 0.10 for d in deviations))
    # these runs predate --gpus: no measurement records its GPU, so there is no split per GPU
    assert not any("gpu_index" in c for m in ("h100-c", "h100-d") for c in _ok_cells(m).values())
    assert a.per_gpu == {}

    assert tool.main([str(AA / "results"), "--pair", "h100-c", "h100-d"]) == 0
    out = capsys.readouterr().out
    assert f"h100-c {COMMIT[:8]} vs h100-d {COMMIT[:8]}" in out and f"{len(both)} cells in common" in out


def test_a_run_that_records_its_gpus_is_split_per_gpu(tool: ModuleType) -> None:
    Cell = tool.Cell
    # constructed: a one-GPU base measured before --gpus, a head over two GPUs
    base = {("p", "w", m): Cell(1.0) for m in ("a", "b", "c", "d", "e")}
    head = {("p", "w", "a"): Cell(1.01, "0"), ("p", "w", "b"): Cell(1.20, "0"),
            ("p", "w", "c"): Cell(0.97, "1"), ("p", "w", "d"): Cell(1.08, "1"), ("p", "w", "e"): Cell(0.88, "1")}
    a = tool.agreement(base, head)
    assert a.in_common == 5 and list(a.per_gpu) == ["head"]
    on_0, on_1 = a.per_gpu["head"]["0"], a.per_gpu["head"]["1"]
    assert (on_0.cells, on_1.cells) == (2, 3)
    assert on_0.median == pytest.approx((0.01 + 0.20) / 2) and on_0.max == pytest.approx(0.20)
    assert on_1.median == pytest.approx(0.08) and on_1.beyond == (2, 1)  # 3%, 8%, 12%
    assert a.overall.beyond == (3, 2)
    # a cell only one run measured is not in common; a base that records its GPU is split too
    a = tool.agreement({**{k: Cell(1.0, "0") for k in base}, ("p", "x", "a"): Cell(1.0, "0")}, head)
    assert a.in_common == 5 and list(a.per_gpu) == ["base", "head"] and a.per_gpu["base"]["0"] == a.overall


def test_the_gpu_of_each_cell_is_read_from_the_cell_store(tool: ModuleType, tmp_path: Path) -> None:
    # the A/A pair copied, h100-d's measurements marked as a run on two GPUs would record them (constructed: prefill
    # on GPU 0, decode on GPU 1)
    for part in ("results", "cells"):
        shutil.copytree(AA / part, tmp_path / part)
    for path in (tmp_path / "cells" / "h100-d").rglob("*.json"):
        cell = json.loads(path.read_text())
        if "preset" in cell:
            path.write_text(json.dumps({**cell, "gpu_index": "1" if cell["preset"] == "decode" else "0"}))
    runs, _ = list_runs(tmp_path / "results")
    base, head = tool.pick(runs, "h100-c"), tool.pick(runs, "h100-d")
    cells, _ = tool.measured(tmp_path / "results", [base, head])
    a = tool.agreement(cells[base.path], cells[head.path])
    both = _ok_cells("h100-c").keys() & _ok_cells("h100-d").keys()
    assert list(a.per_gpu) == ["head"]
    assert {g: s.cells for g, s in a.per_gpu["head"].items()} == {
        "0": sum(k[0] == "prefill" for k in both), "1": sum(k[0] == "decode" for k in both)}


def test_agreement_may_be_read_over_the_cells_of_50_us_or_more_alone(tool: ModuleType,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    runs, _ = list_runs(AA / "results")
    base, head = tool.pick(runs, "h100-c"), tool.pick(runs, f"h100-d@{COMMIT[:8]}")
    cells, _ = tool.measured(AA / "results", [base, head])
    long = tool.agreement(cells[base.path], cells[head.path], 0.05)
    b = _medians("h100-c")
    both = _ok_cells("h100-c").keys() & _ok_cells("h100-d").keys()
    assert 0 < long.in_common == sum(b[k] >= 0.05 for k in both) < len(both)
    assert tool.main([str(AA / "results"), "--pair", "h100-c", "h100-d", "--min-us", "50"]) == 0
    assert f"{long.in_common} cells in common of 50 us or more" in capsys.readouterr().out
