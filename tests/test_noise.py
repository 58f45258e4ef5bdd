"""tracker.analyse.noise: a cell's history over a machine's earlier runs (its levels, its compiles' spread, its class's
prior, the segment after its latest step) and the noise a change of it is judged against. The tables are
constructed: results-table rows of made-up runs whose compiles' means and spreads are chosen for the arithmetic."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tracker.analyse.noise import EmpiricalNoise, History, cell_class
from tracker.stats import Compiles, HostBound, NoiseModel

GPU_BOUND = "plain GPU-bound"  # default/eager/reduce-overhead at 1 ms with a 5 us launch floor


def row(day: int, mode: str, mean_ms: float, compiles: int = 3, log_sd: float | None = 0.01,
        workload: str = "w", status: str = "ok") -> dict:
    """One cell of a constructed run on day `day` (its commit named by the day)."""
    return {"commit": f"c{day:02d}", "machine": "m", "torch": "t", "date": f"2026-11-{day:02d}T00:00:00+00:00",
            "gpu": "g", "preset": "prefill", "workload": workload, "mode": mode, "status": status,
            "median_ms": mean_ms * 0.99, "compiles": compiles, "compiles_mean_ms": mean_ms,
            "compiles_log_sd": log_sd if compiles > 1 else math.nan, "compiles_set_aside": 0, "launch_us": 5.0}


def test_a_cells_history_is_its_runs_levels_oldest_first_and_its_compiles_pooled() -> None:
    t = pd.DataFrame([row(d, "default", ms) for d, ms in ((3, 1.02), (1, 1.00), (2, 1.01))]
                     + [row(4, "default", 9.0, status="failed")])  # a failed cell is no level
    h = History.from_table(t)
    cell = h.cells[("prefill", "w", "default")]
    assert h.runs == 3 and cell.counts == (3, 3, 3)
    assert cell.levels == pytest.approx((0.0, math.log(1.01), math.log(1.02)))
    assert (cell.within_df, cell.within_var) == (6, pytest.approx(0.01 ** 2))
    assert h.classes[("prefill", "w", "default")] == GPU_BOUND
    assert History.from_table(t, lookback=2).cells[("prefill", "w", "default")].levels == pytest.approx(
        (math.log(1.01), math.log(1.02)))
    assert History.from_table(t.iloc[:0]).cells == {}


def test_a_class_prior_counts_the_compiles_of_cells_replicated_in_every_run_only() -> None:
    rows = []
    for day in (1, 2, 3):
        rows += [row(day, "default", 1.0, log_sd=0.01), row(day, "reduce-overhead", 1.0, log_sd=0.02)]
        # eager had one compile a night, then three once a confirmation re-measured it, the noisiest of its class
        rows.append(row(day, "eager", 1.0, compiles=1) if day < 3 else row(day, "eager", 1.0, log_sd=0.10))
    h = History.from_table(pd.DataFrame(rows))
    assert h.cells[("prefill", "w", "eager")].within_var == pytest.approx(0.10 ** 2)  # its own history keeps it
    prior = h.priors[GPU_BOUND]
    assert prior.within_var == pytest.approx((0.01 ** 2 + 0.02 ** 2) / 2)  # the median of default's and r-o's


def test_the_history_of_a_cell_that_stepped_starts_at_its_step() -> None:
    levels = (1.000, 1.002, 0.998, 1.001, 1.100, 1.102, 1.098)  # +10% on day 5 and since
    rows = [row(d, "default", ms) for d, ms in enumerate(levels, 1)]
    # still cells of its class, whose level spread (the class's prior, a median over its cells) is its noise
    rows += [row(d, "eager", 1.0 + 0.001 * (d % 2), workload=w) for d in range(1, 8) for w in ("a", "b", "c")]
    h = History.from_table(pd.DataFrame(rows))
    stepped = h.cells[("prefill", "w", "default")]
    assert stepped.levels == pytest.approx(tuple(math.log(x) for x in levels[4:]))
    assert stepped.counts == (3, 3, 3)
    assert len(h.cells[("prefill", "a", "eager")].levels) == 7  # no step: every run


def test_the_class_of_a_cell() -> None:
    ties, host = NoiseModel(), HostBound()
    assert cell_class("default", 1.0, 5.0, ties, host) == GPU_BOUND
    assert cell_class("max-autotune", 0.040, 5.0, ties, host) == "autotuned small"
    assert cell_class("eager", 0.020, 5.0, ties, host) == "plain host-bound"  # 20 us <= 6 x 5 us


def test_a_cells_noise_is_unknown_without_history_and_compiles_and_never_under_the_run_floor() -> None:
    model = EmpiricalNoise(History(), prior_df=4.0, run_floor=0.01)
    one = Compiles.of([1.0])
    three = Compiles.of([1.00, 1.01, 1.02])
    assert one is not None and three is not None
    assert model.noise(("prefill", "w", "default"), GPU_BOUND, one, one) is None  # the bands judge it
    n = model.noise(("prefill", "w", "default"), GPU_BOUND, three, three)
    assert n is not None and n.source == "6 compiles of this comparison" and n.df == 4
    assert n.sd == pytest.approx(three.log_sd) and (n.run_sd, n.run_df) == (0.01, math.inf)
    # measured together, the two sides share their run's level: only the compiles separate them
    se_together, _ = n.se(3, 3, together=True)
    se_apart, _ = n.se(3, 3, together=False)
    assert se_together == pytest.approx(n.sd * math.sqrt(2 / 3)) and se_apart > se_together


def test_a_cells_noise_reads_its_history_and_its_class() -> None:
    rows = [row(d, m, 1.0 + 0.01 * ((d + i) % 3)) for d in range(1, 6) for i, m in enumerate(("default", "eager"))]
    h = History.from_table(pd.DataFrame(rows))
    one = Compiles.of([1.0])
    assert one is not None
    n = EmpiricalNoise(h).noise(("prefill", "w", "default"), GPU_BOUND, one, one)
    assert n is not None
    assert n.source == ("15 compiles of 5 earlier runs; the levels of 5 earlier runs; the plain GPU-bound prior")
    assert n.sd == pytest.approx(0.01, rel=0.01)  # every compile's spread, constructed at 1%
