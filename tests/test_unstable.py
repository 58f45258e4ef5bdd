"""A cell too noisy to judge is never silent: the summary (text and JSON) names it and the report marks it.

The latest committed CPU run (tests/fixtures/cpu-tiny, 2 loaded cores) has two such cells: tiny diff_cfg_blend default,
whose samples spread over 100% of their median (a 28 ms median against eager's 0.01 ms), and llm_rmsnorm eager.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tracker import cli
from tracker.analyse.unstable import unstable_cells
from tracker.publish import summary
from tracker.stats import TOO_NOISY_SPREAD
from tracker.store.results import load_results

ROOT = Path(__file__).resolve().parent.parent
CPU_TINY = ROOT / "tests" / "fixtures" / "cpu-tiny" / "results"
LATEST = "bc844535"  # the run `summary` shows; the earlier run of the fixture has other noisy cells
NOISY = {("diff_cfg_blend", "default"), ("llm_rmsnorm", "eager")}


def test_cells_whose_samples_spread_beyond_the_bound_are_flagged():
    table = load_results(CPU_TINY, commit=LATEST).table
    flagged = unstable_cells(table)
    assert set(zip(flagged["workload"], flagged["mode"], strict=True)) == NOISY
    assert (flagged["spread"] > TOO_NOISY_SPREAD).all()
    spread = (table["q75"] - table["q25"]) / table["median_ms"]
    calm = table[(table["status"] == "ok") & (spread <= TOO_NOISY_SPREAD)]
    assert len(calm) > 0  # the others of the run are not flagged


def test_the_summary_names_them_in_text_and_json(capsys: pytest.CaptureFixture[str]):
    assert cli.main(["summary", "--results-dir", str(CPU_TINY), "--format", "table"]) == 0
    text = capsys.readouterr().out
    assert "TOO NOISY TO JUDGE (2 cells" in text
    assert cli.main(["summary", "--results-dir", str(CPU_TINY), "--format", "json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    noisy = run["presets"]["tiny"]["too_noisy"]
    assert {(u["workload"], u["mode"]) for u in noisy} == NOISY and all(u["spread"] > 0.2 for u in noisy)


def test_the_report_marks_them(tmp_path: Path):
    results = tmp_path / "results"
    shutil.copytree(CPU_TINY, results)
    assert cli.main(["report", "--results-dir", str(results), "--out", str(tmp_path / "out")]) == 0
    html = (tmp_path / "out" / "index.html").read_text()
    assert html.count('<span class="noisy-flag">too noisy to judge</span>') == len(NOISY)


def test_an_instance_whose_every_ok_cell_is_too_noisy_says_so_not_that_nothing_measured_ok() -> None:
    """The quickstart on a loaded 2-core host: every mode of llm_rmsnorm measured ok, all too noisy to rank. The note
    said "no mode measured ok"; it says how its winner won: among cells all too noisy (tracker.analyse.best).
    (Constructed: the fixture's latest run, its llm_rmsnorm default cell's quartiles widened past the bound; its eager
    cell is too noisy as measured.)"""
    from tracker.publish.summaryjson import summary_json

    table = load_results(CPU_TINY, commit=LATEST).table.copy()
    row = (table["workload"] == "llm_rmsnorm") & (table["mode"] == "default")
    table.loc[row, "q75"] = table.loc[row, "median_ms"] * (1 + 2 * TOO_NOISY_SPREAD)
    notes = summary_json(table)["runs"][0]["presets"]["tiny"]["notes"]
    (note,) = [n for n in notes if n.startswith("llm_rmsnorm:")]
    assert note.startswith("llm_rmsnorm: won by ") and note.endswith(" among cells all too noisy to judge")
    assert not any("no mode measured ok" in n for n in notes)


def test_a_kernel_whose_own_cell_is_too_noisy_says_so_beside_its_speedup() -> None:
    """(Constructed: the committed CPU run with a kernel under test, tests/fixtures/cpu-kernels, its candidate's
    quartiles widened past the bound, as the quickstart's loaded host measured one.)"""
    from tracker.publish.summaryjson import summary_json

    table = load_results(ROOT / "tests" / "fixtures" / "cpu-kernels" / "results").table.copy()
    row = table["mode"].astype(str) == "kernel:torch_fp32"
    table.loc[row, "q75"] = table.loc[row, "median_ms"] * (1 + 2 * TOO_NOISY_SPREAD)
    (line,) = [x for x in summary.render(summary_json(table)).splitlines() if "torch_fp32:" in x]
    assert line.endswith("than best (eager); too noisy to judge")


def test_a_run_whose_every_cell_is_too_noisy_is_still_summarised() -> None:
    """A loaded 2-core host can leave no cell quiet enough to rank: the summary still shows the run, each instance
    won among cells all too noisy, every such cell listed, never an empty page. (Constructed: the fixture's latest
    run, every ok cell's quartiles widened past the bound.)"""
    from tracker.publish.summaryjson import summary_json

    table = load_results(CPU_TINY, commit=LATEST).table.copy()
    ok = table["status"] == "ok"
    table.loc[ok, "q75"] = table.loc[ok, "median_ms"] * (1 + 2 * TOO_NOISY_SPREAD)
    (run,) = summary_json(table)["runs"]
    tiny = run["presets"]["tiny"]
    assert tiny["instances"] == 2 and len(tiny["too_noisy"]) == ok.sum()
    assert sorted(n.split(" won by ")[0] for n in tiny["notes"]) == ["diff_cfg_blend:", "llm_rmsnorm:"]
    assert all(n.endswith(" among cells all too noisy to judge") for n in tiny["notes"])
    text = summary.render(summary_json(table))
    assert "tiny: 2 instances" in text and "TOO NOISY TO JUDGE" in text
