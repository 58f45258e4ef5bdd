"""tools/simulate_gpus.py: a measured run replayed through the runner's own scheduler. Checked against the committed
one-GPU runs' own wall times (their logs' last line), and for the rules a simulated run must keep."""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("simulate_gpus", ROOT / "tools" / "simulate_gpus.py")
assert spec is not None and spec.loader is not None
simulate_gpus = importlib.util.module_from_spec(spec)
sys.modules["simulate_gpus"] = simulate_gpus  # its dataclasses look their module up
spec.loader.exec_module(simulate_gpus)

RUNS = {"h100-f": ROOT / "tests/fixtures/h100-aa4", "h100-g": ROOT / "tests/fixtures/h100-aa4",
        "h100-i": ROOT / "tests/fixtures/h100-aa6"}


def _store(machine: str) -> Path:
    return next((RUNS[machine] / "cells" / machine).glob("*/torch-*"))


def _measured_wall(machine: str) -> float:
    """The run's own count of its seconds: its log's last line, "GPU lock held H s of W s"."""
    log = (RUNS[machine] / f"log-{machine}.txt").read_text()
    return float(re.findall(r"GPU lock held \d+ s of (\d+) s", log)[-1])


@pytest.mark.slow
@pytest.mark.parametrize("machine", sorted(RUNS))
def test_the_simulation_predicts_a_one_gpu_run_s_own_wall_time_within_6_percent(machine: str) -> None:
    records = simulate_gpus.run_records(_store(machine))
    assert len(records) == 377  # the run's own measurements, its confirmation's left out
    # as those runs measured: a cell's further compiles one at a time
    predicted = simulate_gpus.predict(records, simulate_gpus.Params(gpus=1, cores=16, together=1)).wall_s
    assert abs(predicted / _measured_wall(machine) - 1) <= 0.06


def test_a_simulated_run_measures_each_once_its_further_compiles_after_its_first_and_one_lock_holder_a_gpu() -> None:
    records = [r for r in simulate_gpus.run_records(_store("h100-i")) if r["preset"] == "decode"
               and r["workload"].startswith(("llm_", "diff_"))]
    sim = simulate_gpus.simulate(records, simulate_gpus.Params(gpus=2, cores=32))
    assert sorted((r["workload"], r["mode"], r["replicate"]) for r in sim) == sorted(
        (r["workload"], r["mode"], r.get("replicate") or 1) for r in records)
    ended = {(r["workload"], r["mode"], r["replicate"]): r["ended_at"] for r in sim}
    for r in sim:
        if r["replicate"] > 1:
            assert r["launched_at"] >= ended[(r["workload"], r["mode"], 1)]
    for gpu in ("0", "1"):
        holds = sorted((r["launched_at"] + g, r["launched_at"] + e) for r in sim if r["gpu_index"] == gpu
                       for _, g, e in r["lock_spans"])
        assert holds and all(b[0] >= a[1] - 1e-9 for a, b in itertools.pairwise(holds))


@pytest.mark.slow
def test_processes_that_stay_predict_the_stay_run_and_shorten_a_run_whose_cuda_starts_queue() -> None:
    # tests/fixtures/h200-stay: four H200s, processes that stay, 152 s from first launch to last end; CUDA's start a
    # queue of the whole host, modelled as about 1.5 starts at full speed at once
    store = next((ROOT / "tests/fixtures/h200-stay/x4/cells-e/h100x4-e").glob("*/torch-*"))
    records = simulate_gpus.run_records(store)
    queue = {"gpus": 4, "cores": 64, "start_s": 0.0, "init_s": 0.6, "init_capacity": 1.5}
    stay = simulate_gpus.predict(records, simulate_gpus.Params(**queue, stay=True)).wall_s
    fresh = simulate_gpus.predict(records, simulate_gpus.Params(**queue)).wall_s
    phases = (ROOT / "tests/fixtures/h200-stay/x4/phases-h100x4-e.txt").read_text()
    measured = float(re.findall(r"measurements over (\d+) s \(first launch to last end\)", phases)[0])
    assert abs(stay / measured - 1) <= 0.06 and stay < fresh


@pytest.mark.slow
def test_scheduled_by_the_modes_priors_as_it_ran_the_simulation_predicts_a_cold_four_gpu_run_within_6_percent() -> None:
    # tests/fixtures/h200-stay/x4-e2: four H200s, a fresh results directory and cell store (so the runner knew only
    # the modes' prior costs), 155 s from first launch to last end
    store = next((ROOT / "tests/fixtures/h200-stay/x4-e2/cells/x4-e2").glob("*/torch-*"))
    records = simulate_gpus.run_records(store)
    host = {"gpus": 4, "cores": 64, "start_s": 0.0, "init_s": 0.6, "init_capacity": 1.5, "stay": True}
    cold = simulate_gpus.predict(records, simulate_gpus.Params(**host, prior_costs=True)).wall_s
    learned = simulate_gpus.predict(records, simulate_gpus.Params(**host)).wall_s
    assert cold != learned  # the two schedules place the cells differently
    phases = (ROOT / "tests/fixtures/h200-stay/x4-e2/phases-x4-e2.txt").read_text()
    measured = float(re.findall(r"measurements over (\d+) s \(first launch to last end\)", phases)[0])
    assert abs(cold / measured - 1) <= 0.06
