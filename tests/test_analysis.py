"""tracker.analyse.best on small hand-made runs: best mode, ties, failures, a missing eager cell, margins, host-bound,
history and timelines."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from test_results import instance, write_result_file

from tracker.analyse import best as analysis
from tracker.publish.summaryjson import summary_json
from tracker.stats import HostBound, NoiseModel
from tracker.store import results
from workloads.names import MODES

T0 = 1_767_225_600_000  # 2026-01-01 in ms: a plausible run date
MANCG = "max-autotune-no-cudagraphs"


def load(tmp_path: Path, *runs: dict[str, Any]) -> pd.DataFrame:
    """Write each run (kwargs of write_result_file, cells under 'cells') and load them all."""
    for run in runs:
        run = dict(run)
        write_result_file(tmp_path, run.pop("cells"), **run)
    return results.load_results(tmp_path).table


def ci(median: float, half: float) -> dict[str, Any]:
    return {"median": median, "ci": (median - half, median + half)}


def one(tmp_path: Path, cells: dict[Any, Any], **run: Any) -> dict[str, Any]:
    t = load(tmp_path, {"cells": cells, **run})
    return summary_json(t)["runs"][0]["presets"]


def test_best_mode_is_the_fastest_ok_median_and_failures_never_win(tmp_path: Path) -> None:
    cells = instance("prefill", "llm_rmsnorm", {"eager": 0.50, "default": 0.12, "reduce-overhead": 0.13,
                                                "max-autotune": None, MANCG: 0.11})
    cells |= instance("prefill", "llm_layernorm", {"eager": 0.10, "default": None, MANCG: None})
    p = one(tmp_path, cells)["prefill"]
    assert p["winners"] == {"llm_rmsnorm": MANCG, "llm_layernorm": "eager"}
    assert p["wins"] == {"eager": 1, "default": 0, "reduce-overhead": 0, "max-autotune": 0, MANCG: 1}
    assert "llm_rmsnorm: failed: max-autotune" in p["notes"]
    assert "llm_layernorm: failed: default, max-autotune-no-cudagraphs" in p["notes"]


def test_wins_list_all_five_modes_zeros_included(tmp_path: Path) -> None:
    p = one(tmp_path, instance("decode", "llm_rmsnorm", {"eager": 0.03, "default": 0.01}))["decode"]
    assert list(p["wins"]) == ["eager", "default", "reduce-overhead", "max-autotune", MANCG]
    assert p["wins"]["default"] == 1 and sum(p["wins"].values()) == 1


def test_equal_medians_go_to_the_earlier_mode(tmp_path: Path) -> None:
    p = one(tmp_path, instance("prefill", "llm_gelu_mlp", {"eager": 2.4, "default": 2.2, MANCG: 2.2}))["prefill"]
    assert p["winners"]["llm_gelu_mlp"] == "default"


def test_a_missing_eager_cell_leaves_the_instance_out_of_the_geomeans(tmp_path: Path) -> None:
    cells = instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": 0.25, MANCG: 0.125})
    cells |= instance("prefill", "llm_qk_norm", {"eager": None, "default": 0.1, MANCG: 0.2})
    p = one(tmp_path, cells)["prefill"]
    assert p["instances"] == 2  # still counted for wins
    assert p["winners"]["llm_qk_norm"] == "default"
    assert p["geomean_vs_eager"]["default"] == 2.0 and p["geomean_vs_eager"][MANCG] == 4.0
    assert p["geomean_vs_eager"]["max-autotune"] is None
    assert "llm_qk_norm: no ok eager cell: left out of the geomeans" in p["notes"]


def test_geomean_is_over_instances_where_both_eager_and_the_mode_are_ok(tmp_path: Path) -> None:
    cells = instance("prefill", "llm_rmsnorm", {"eager": 1.0, "default": 0.5})
    cells |= instance("prefill", "llm_layernorm", {"eager": 1.0, "default": 0.125})
    cells |= instance("prefill", "llm_qk_norm", {"eager": 1.0, "default": None})
    p = one(tmp_path, cells)["prefill"]
    assert p["geomean_vs_eager"]["default"] == pytest.approx(math.sqrt(2 * 8), abs=1e-3)


def test_an_instance_without_any_ok_cell_is_not_counted(tmp_path: Path) -> None:
    cells = instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": 0.2})
    cells |= instance("prefill", "llm_topk_sampling_prep", {"eager": None, "default": None})
    p = one(tmp_path, cells)["prefill"]
    assert p["instances"] == 1 and "llm_topk_sampling_prep" not in p["winners"]
    assert "llm_topk_sampling_prep: no mode measured ok: not counted" in p["notes"]


def test_head_to_head_margins_are_relative_to_default_averaged_per_side(tmp_path: Path) -> None:
    cells = instance("prefill", "llm_rmsnorm", {"eager": 2.0, "default": 1.0, MANCG: 0.90})  # mancg by 10%
    cells |= instance("prefill", "llm_layernorm", {"eager": 2.0, "default": 1.0, MANCG: 0.70})  # mancg by 30%
    cells |= instance("prefill", "llm_qk_norm", {"eager": 2.0, "default": 1.0, MANCG: 1.05})  # default by 5%
    # eager wins here, but head-to-head counts every instance where both are ok
    cells |= instance("prefill", "llm_topk_sampling_prep", {"eager": 0.5, "default": 1.0, MANCG: 1.1})
    h = one(tmp_path, cells)["prefill"]["head_to_head"]
    assert h[MANCG] == {"wins": 2, "avg_margin_pct": 20.0}
    assert h["default"] == {"wins": 2, "avg_margin_pct": 7.5}


def test_decode_invariant_workloads_are_not_decode_instances(tmp_path: Path) -> None:
    cells = instance("decode", "rl_dpo_loss", {"eager": 0.04, "default": 0.01})
    cells |= instance("decode", "llm_rmsnorm", {"eager": 0.03, "default": 0.01})
    p = one(tmp_path, cells)["decode"]
    assert p["instances"] == 1 and list(p["winners"]) == ["llm_rmsnorm"]


# ---------------------------------------------------------------------------------------------------- noise


def test_a_small_kernel_runner_up_within_the_band_is_a_tie(tmp_path: Path) -> None:
    # 20 us kernels: 8% apart is within the 10% band for < 50 us; the strict winner stays the fastest
    cells = instance("decode", "llm_rmsnorm", {"eager": 0.060, "default": 0.0200, MANCG: 0.0216})
    p = one(tmp_path, cells, launch_us=None)["decode"]
    assert p["winners"]["llm_rmsnorm"] == "default"
    assert p["ties"] == {"llm_rmsnorm": ["default", MANCG]}


def test_a_large_kernel_needs_to_be_within_three_percent(tmp_path: Path) -> None:
    cells = instance("prefill", "llm_gelu_mlp", {"eager": 2.60, "default": 2.46, MANCG: 2.40})  # 2.5%: tie
    cells |= instance("prefill", "llm_swiglu_mlp", {"eager": 3.60, "default": 3.33, MANCG: 3.20})  # 4.1%: no tie
    p = one(tmp_path, cells)["prefill"]
    assert p["ties"] == {"llm_gelu_mlp": [MANCG, "default"]}


def test_overlapping_confidence_intervals_make_a_tie(tmp_path: Path) -> None:
    cells = instance("prefill", "llm_swiglu_mlp", {"eager": ci(3.6, 0.01), "default": ci(3.35, 0.14),
                                                   MANCG: ci(3.20, 0.02)})
    t = load(tmp_path, {"cells": cells})
    with_ci = summary_json(t)["runs"][0]["presets"]["prefill"]
    assert with_ci["ties"] == {"llm_swiglu_mlp": [MANCG, "default"]}  # 3.21 ~ 3.22: overlap though 4.7% apart
    without = summary_json(t, analysis=analysis.analyse(t, NoiseModel(use_ci=False)))
    assert without["runs"][0]["presets"]["prefill"]["ties"] == {}


def test_the_tie_band_is_a_parameter(tmp_path: Path) -> None:
    t = load(tmp_path, {"cells": instance("prefill", "llm_swiglu_mlp", {"eager": 3.6, "default": 3.35, MANCG: 3.20})})
    wide = analysis.analyse(t, NoiseModel(rel_band=0.05))
    assert wide.instances.iloc[0]["ties"] == (MANCG, "default")
    assert analysis.analyse(t).instances.iloc[0]["ties"] == (MANCG,)


def test_host_bound_instances_are_flagged_from_the_launch_floor(tmp_path: Path) -> None:
    cells = instance("decode", "diff_cfg_blend", {"eager": 0.018, "default": 0.015})  # 15 us <= 6 x 5 us
    cells |= instance("decode", "llm_swiglu_mlp", {"eager": 0.065, "default": 0.045})  # 45 us > 30 us
    t = load(tmp_path, {"cells": cells, "launch_us": 5.0})
    p = summary_json(t)["runs"][0]["presets"]["decode"]
    assert p["host_bound"] == ["diff_cfg_blend"]
    strict = analysis.analyse(t, host=HostBound(k=2.0))
    assert not strict.instances["host_bound"].any()
    inst = analysis.analyse(t).instances.set_index("workload")
    assert bool(inst.loc["diff_cfg_blend", "host_bound"]) and not bool(inst.loc["llm_swiglu_mlp", "host_bound"])


def test_without_a_launch_floor_nothing_is_host_bound(tmp_path: Path) -> None:
    p = one(tmp_path, instance("decode", "diff_cfg_blend", {"eager": 0.018}), launch_us=None)["decode"]
    assert p["host_bound"] == []


# ---------------------------------------------------------------------------------------------------- history


@pytest.fixture
def three_runs(tmp_path: Path) -> analysis.Analysis:
    """Two commits under torch 2.9.1, the second also under 2.10.0: rmsnorm's winner changes over time."""
    def cells(default: float, mancg: float) -> dict[Any, Any]:
        return instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": default, MANCG: mancg})

    t = load(tmp_path,
             {"cells": cells(0.120, 0.110), "commit": "1" * 40, "date_ms": T0 + 1_000_000, "env": "py-a"},
             {"cells": cells(0.100, 0.112), "commit": "2" * 40, "date_ms": T0 + 2_000_000, "env": "py-a"},
             {"cells": cells(0.100, 0.099), "commit": "2" * 40, "date_ms": T0 + 2_000_000, "env": "py-b",
              "torch": "2.10.0"})
    return analysis.analyse(t)


def test_history_over_commits_is_by_date(three_runs: analysis.Analysis) -> None:
    h = analysis.history(three_runs, "commit")
    assert [(str(c)[0], str(v)) for c, v in zip(h["commit"], h["torch"], strict=True)] == [
        ("1", "2.9.1"), ("2", "2.9.1"), ("2", "2.10.0")]
    assert list(h["wins_default"]) == [0, 1, 0] and list(h[f"wins_{MANCG}"]) == [1, 0, 1]
    assert h["geomean_default"].iloc[0] == pytest.approx(0.5 / 0.12)


def test_history_over_torch_versions_is_in_version_order(three_runs: analysis.Analysis) -> None:
    h = analysis.history(three_runs, "torch")
    assert list(h["torch"].astype(str)) == ["2.9.1", "2.10.0"]  # not string order
    assert list(h["commit"].astype(str).str[0]) == ["2", "2"]  # each version's latest run
    with pytest.raises(ValueError, match="axis"):
        analysis.history(three_runs, "month")


def test_best_mode_timeline_marks_changes_beyond_noise(three_runs: analysis.Analysis) -> None:
    tl = analysis.best_mode_timeline(three_runs)
    series = tl[tl["torch"] == "2.9.1"]
    assert list(series["winner"]) == [MANCG, "default"]
    assert list(series["changed"]) == [False, True]
    # 0.100 vs 0.112 (12%) is beyond the 3% band: a real change
    assert list(series["changed_beyond_noise"]) == [False, True]
    assert len(tl[tl["torch"] == "2.10.0"]) == 1


def test_a_flip_within_noise_is_a_change_but_not_beyond_noise(tmp_path: Path) -> None:
    def cells(default: float, mancg: float) -> dict[Any, Any]:
        return instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": default, MANCG: mancg})

    t = load(tmp_path, {"cells": cells(0.1010, 0.1000), "commit": "1" * 40, "date_ms": T0 + 1},
             {"cells": cells(0.1000, 0.1005), "commit": "2" * 40, "date_ms": T0 + 2})
    tl = analysis.best_mode_timeline(analysis.analyse(t))
    assert list(tl["changed"]) == [False, True] and list(tl["changed_beyond_noise"]) == [False, False]


def test_figures_cover_every_run_and_preset_at_once(tmp_path: Path) -> None:
    cells = instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": 0.12})
    cells |= instance("decode", "llm_rmsnorm", {"eager": 0.03, "default": 0.01})
    t = load(tmp_path, {"cells": cells, "commit": "1" * 40, "date_ms": T0 + 1},
             {"cells": cells, "commit": "2" * 40, "date_ms": T0 + 2, "machine": "h200"})
    f = analysis.analyse(t).figures
    assert len(f) == 4 and set(f["machine"].astype(str)) == {"h100", "h200"}
    assert (f["instances"] == 1).all() and (f["wins_default"] == 1).all()


H100 = Path(__file__).resolve().parent / "fixtures" / "h100-aa2" / "results"  # two full runs, one commit


@pytest.mark.skipif(not H100.is_dir(), reason="the H100 fixture is not in this checkout")
@pytest.mark.parametrize("machine", ["h100-c", "h100-d"])
def test_h100_winners_are_the_fastest_medians_computed_independently(machine: str) -> None:
    t = results.load_results(H100).table
    (run,) = [r for r in summary_json(t)["runs"] if r["machine"] == machine]
    t = t[(t["commit"].astype(str) == run["commit"]) & (t["machine"] == machine) & t["mode"].astype(str).isin(MODES)]
    for preset, figures in run["presets"].items():
        cells = t[t["preset"] == preset]
        fastest = cells.loc[cells.groupby("workload", observed=True)["median_ms"].idxmin()]
        assert figures["winners"] == {str(r.workload): str(r.mode) for r in fastest.itertuples()}
        assert sum(figures["wins"].values()) == figures["instances"] == cells["workload"].nunique()
        eager = cells[cells["mode"] == "eager"].set_index("workload")["median_ms"]
        default = cells[cells["mode"] == "default"].set_index("workload")["median_ms"]
        expected = math.exp(float((eager / default).map(math.log).mean()))
        assert figures["geomean_vs_eager"]["default"] == round(expected, 3)
