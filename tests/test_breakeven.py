"""Compile break-even, the study's second question: calls until compiling pays off against eager, per instance and
compiled mode, on the committed real runs (tests/fixtures/h100-aa2: two cold full H100 runs, h100-c and h100-d, of one
commit; cpu-tiny: eager + default)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from tracker.analyse.breakeven import BREAK_EVEN_COLUMNS, break_even
from tracker.publish import summary
from tracker.store.results import load_results

ROOT = Path(__file__).resolve().parent.parent
H100 = ROOT / "tests" / "fixtures" / "h100-aa2" / "results"  # its PROVENANCE.md
CPU_TINY = ROOT / "tests" / "fixtures" / "cpu-tiny" / "results"
COMMIT = "759ff183dcd5bdaec5fa61a7f55acb9f10b761ee"  # both runs'
MACHINE = "h100-d"  # the later run: the figures below are its
MANCG = "max-autotune-no-cudagraphs"


@pytest.fixture(scope="module")
def h100() -> pd.DataFrame:
    return load_results(H100).table


def _row(b: pd.DataFrame, preset: str, workload: str, mode: str) -> pd.Series:
    (i,) = b.index[(b["commit"] == COMMIT) & (b["machine"] == MACHINE) & (b["preset"] == preset)
                   & (b["workload"] == workload) & (b["mode"] == mode)]
    return b.loc[i]


def test_calls_to_break_even_are_compile_seconds_over_time_saved_per_call(h100: pd.DataFrame) -> None:
    b = break_even(h100)
    assert list(b.columns) == BREAK_EVEN_COLUMNS
    # prefill llm_kl_divergence_loss, default, on h100-d: first call 3.226 s, eager 12.817 ms, default 5.107 ms a call
    r = _row(b, "prefill", "llm_kl_divergence_loss", "default")
    cell = h100[(h100["commit"] == COMMIT) & (h100["machine"] == MACHINE) & (h100["preset"] == "prefill")
                & (h100["workload"] == "llm_kl_divergence_loss")]
    cell = cell.set_index(cell["mode"].astype(str))
    assert r["compile_s"] == cell.loc["default", "compile_s"]  # the cell's compile_time metric (first call)
    assert (r["eager_ms"], r["mode_ms"]) == (cell.loc["eager", "median_ms"], cell.loc["default", "median_ms"])
    assert r["calls"] == math.ceil(r["compile_s"] * 1e3 / (r["eager_ms"] - r["mode_ms"])) == 419
    # a 5 us decode blend (eager 9.9 us) saves 5.1 ns a call: 668k calls to repay 3.42 s of compiling
    assert _row(b, "decode", "diff_cfg_blend", "default")["calls"] == 668340


def test_a_mode_not_faster_than_eager_never_breaks_even(h100: pd.DataFrame) -> None:
    b = break_even(h100)
    r = _row(b, "decode", "diff_cfg_blend", "max-autotune")  # 21.9 us against eager's 9.9 us
    assert r["saved_ms"] < 0 and r["calls"] is None
    assert all((c is None) == (s <= 0) for c, s in zip(b["calls"], b["saved_ms"], strict=True))
    # 41 instances x 4 compiled modes per run, all ok in both runs
    assert len(b) == 2 * 41 * 4 and set(b["mode"]) == {"default", "reduce-overhead", "max-autotune", MANCG}


def test_only_instances_with_eager_and_the_mode_measured_ok() -> None:
    b = break_even(load_results(CPU_TINY).table)  # eager + default only, default slower on this 2-core VM
    assert sorted(set(b["mode"])) == ["default"] and len(b) == 4
    assert b["calls"].isna().all()


def test_summary_json_text_and_markdown_carry_the_break_even() -> None:
    data, _ = summary.summary_for(H100, commit=COMMIT[:8], machine=MACHINE)
    prefill = data["runs"][0]["presets"]["prefill"]
    entry = next(e for e in prefill["break_even"] if (e["workload"], e["mode"]) == ("llm_kl_divergence_loss",
                                                                                      "default"))
    assert entry == {"workload": "llm_kl_divergence_loss", "mode": "default", "compile_s": 3.226,
                     "eager_ms": 12.81728, "mode_ms": 5.107296, "calls": 419}
    text = summary.render(data, "table")
    assert max(len(line) for line in text.splitlines()) <= summary.WIDTH
    assert "  compile break-even: calls until the time saved vs eager repays the compile time (first call)" \
        in text
    line = next(x for x in text.splitlines() if x.startswith("  llm_kl_divergence_loss "))
    assert line.split() == ["llm_kl_divergence_loss", "419", "902", "4.87k", "1.8k"]
    line = next(x for x in text.splitlines() if x.startswith("  diff_cfg_blend ") and "668k" in x)
    assert line.split() == ["diff_cfg_blend", "668k", "never", "never", "580k"]  # decode
    # what the results can and cannot say about the compile times
    assert "do not record whether the compile cache was cold or warm" in " ".join(text.split())
    md = summary.render(data, "md")
    assert "| llm_kl_divergence_loss | 419 | 902 | 4.87k | 1.8k |" in md
