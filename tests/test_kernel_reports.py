"""Kernels under test in the reports: loaded from asv results as "kernel:<name>" rows, never a mode, each judged
against the best baseline of its own run (kernel_rows), in the summary JSON, text, markdown and the HTML report.

Fixtures: a real H100 run with 8 candidate cells, prefill and decode (tests/fixtures/h100-aa2, machine h100-d: the
later of its two runs), a real CPU run with one ok, one skipped and one incorrect candidate, a real CPU run without
candidates (cpu-tiny), and hand-made files for what real runs rarely show (all modes failed, asv's fillers)."""

from __future__ import annotations

import ast
import itertools
import json
import math
from collections.abc import Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_results import instance, write_result_file

from tracker.analyse import best as analysis
from tracker.publish import report, summary
from tracker.store import results
from workloads.names import MODES

FIXTURES = Path(__file__).resolve().parent / "fixtures"
H100 = FIXTURES / "h100-aa2" / "results"  # two runs of commit 759ff183, machines h100-c and h100-d
MACHINE = "h100-d"  # the run these tests read (the latest)
H100_FILE = H100 / MACHINE / "759ff183-existing-py_opt_torch_.venv_bin_python3.json"
CPU = FIXTURES / "cpu-kernels" / "results"
NO_KERNELS = FIXTURES / "cpu-tiny" / "results"  # real runs of the suite without candidates
KERNEL_KEYS = {"workload", "candidate", "median_ms", "best_baseline", "speedup_vs_best", "speedup_vs_eager",
               "correct", "within_noise", "host_bound", "reason"}
X = "\N{MULTIPLICATION SIGN}"  # the report's "times" sign
H100_CANDIDATES = {"llm_rmsnorm:torch_fp32", "llm_rmsnorm:triton_rmsnorm", "diff_cfg_blend:torch_lerp",
                   "diff_cfg_blend:triton_cfg_blend"}


@pytest.fixture(scope="module")
def h100() -> pd.DataFrame:
    return results.load_results(H100, machine=MACHINE).table


@pytest.fixture(scope="module")
def cpu() -> pd.DataFrame:
    return results.load_results(CPU).table


def candidate_results(cells: Mapping[tuple[str, str], Any], presets: tuple[str, ...] = ("prefill", "decode", "tiny"),
                      ) -> dict[str, list[Any]]:
    """The three candidates.Candidate rows of a hand-made result file: (preset, "workload:name") -> median (ms),
    None (failed) or NaN (skipped / not run), laid out as asv writes them."""
    keys = sorted({k for _, k in cells})
    params = [[repr(p) for p in presets], [repr(k) for k in keys]]
    index = {c: i for i, c in enumerate(itertools.product(*params))}
    n = len(index)
    res: list[Any] = [math.nan] * n
    for (p, k), value in cells.items():
        res[index[(repr(p), repr(k))]] = value

    def scaled(f: float) -> list[Any]:
        return [v * f if isinstance(v, float) and not math.isnan(v) else None for v in res]

    latency = [res, params, "1", 0, 1.0, scaled(0.99), scaled(1.01), scaled(0.98), scaled(1.02),
               [1 if v else None for v in scaled(1)], [100 if v else None for v in scaled(1)], [None] * n]
    return {"candidates.Candidate.track_latency": latency,
            "candidates.Candidate.track_compile_time": [[v if v is None else 0.5 for v in res], params, "1", 0, 1.0],
            "candidates.Candidate.track_peak_memory": [[math.nan] * n, params, "1", 0, 1.0]}


# ---------------------------------------------------------------------------------------------------- loading


def test_candidate_cells_load_as_kernel_rows(h100: pd.DataFrame, cpu: pd.DataFrame) -> None:
    assert list(h100["mode"].cat.categories[:5]) == list(MODES)  # the modes keep their codes
    k = h100[~h100["mode"].isin(MODES)]
    assert len(k) == 8 and (k["status"] == "ok").all() and k["commit"].astype(str).str.startswith("759ff183").all()
    assert {f"{w}:{m.removeprefix('kernel:')}" for w, m in zip(k["workload"], k["mode"], strict=True)} \
        == H100_CANDIDATES
    assert set(k["preset"].astype(str)) == {"prefill", "decode"}
    assert k["median_ms"].gt(0).all() and k["compile_s"].notna().all() and k["peak_mem_mib"].notna().all()
    by_mode = cpu.set_index(cpu["mode"].astype(str))
    assert by_mode.loc["kernel:torch_fp32", "status"] == "ok"
    assert by_mode.loc["kernel:triton_rmsnorm", "status"] == "skipped"
    assert by_mode.loc["kernel:triton_rmsnorm", "reason"].endswith("runs on cuda only, not on cpu")
    assert by_mode.loc["kernel:wrong_no_norm", "status"] == "failed"
    assert by_mode.loc["kernel:wrong_no_norm", "reason"].startswith("incorrect: output 0 differs from eager")


def test_candidate_samples_load_with_the_run(h100: pd.DataFrame) -> None:
    one = results.load_samples(H100, MACHINE, "759ff183")
    row = one[one["mode"] == "kernel:triton_rmsnorm"].iloc[0]
    # the fixture keeps 100 order statistics of the samples measured (h100-aa2/PROVENANCE.md); n_samples counts those
    assert len(row["samples"]) == 100 < row["n_samples"]
    assert np.median(row["samples"]) == pytest.approx(row["median_ms"], rel=0.02)


def test_candidates_never_count_as_a_mode(h100: pd.DataFrame) -> None:
    with_kernels = analysis.analyse(h100)
    modes_only = analysis.analyse(h100[h100["mode"].isin(MODES)].reset_index(drop=True))
    pd.testing.assert_frame_equal(with_kernels.figures, modes_only.figures)
    pd.testing.assert_frame_equal(with_kernels.instances, modes_only.instances)
    assert set(with_kernels.instances["winner"].dropna()) <= set(MODES)
    assert modes_only.kernels.empty


def test_the_fastest_kernel_wins_nothing(tmp_path: Path) -> None:
    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": 0.2}),
                      extra=candidate_results({("prefill", "llm_rmsnorm:fast"): 0.01}))
    a = analysis.analyse(results.load_results(tmp_path).table)
    fig = a.figures.iloc[0]
    assert (fig["instances"], fig["wins_default"], fig["geomean_default"]) == (1, 1, 2.5)
    assert a.instances.iloc[0]["winner"] == "default" and a.instances.iloc[0]["ties"] == ("default",)


# ---------------------------------------------------------------------------------------------------- kernel_rows


def _independent_h100() -> dict[tuple[str, str, str], tuple[str, float, float, float]]:
    """(preset, workload, candidate) -> (best mode, its median, eager's, the candidate's), straight from the file."""
    data = json.loads(H100_FILE.read_text())
    rows = data["results"]
    base = rows["baselines.Baseline.track_latency"]
    medians = dict(zip(itertools.product(*base[1]), base[0], strict=True))
    cand = rows["candidates.Candidate.track_latency"]
    out = {}
    for (p, key), ms in zip(itertools.product(*cand[1]), cand[0], strict=True):
        if ms is None or math.isnan(ms):
            continue
        workload, name = ast.literal_eval(key).split(":")  # asv stores parameters as repr()s
        ok = {ast.literal_eval(m): v for (pp, w, m), v in medians.items()
              if pp == p and ast.literal_eval(w) == workload and v is not None and not math.isnan(v)}
        best = min(ok, key=ok.__getitem__)
        out[(ast.literal_eval(p), workload, name)] = (best, ok[best], ok["eager"], ms)
    return out


def test_kernel_rows_match_an_independent_computation(h100: pd.DataFrame) -> None:
    rows = analysis.kernel_rows(analysis.analyse(h100))
    expected = _independent_h100()
    assert len(rows) == len(expected) == 8
    assert list(rows.columns) == analysis.KERNEL_COLUMNS
    for r in rows.to_dict("records"):
        best, best_ms, eager_ms, ms = expected[(r["preset"], r["workload"], r["candidate"])]
        assert (r["best_baseline"], r["mode"], r["correct"]) == (best, f"kernel:{r['candidate']}", True)
        assert r["median_ms"] == pytest.approx(ms)
        assert r["speedup_vs_best"] == pytest.approx(best_ms / ms)
        assert r["speedup_vs_eager"] == pytest.approx(eager_ms / ms)
        assert r["best_ms"] == pytest.approx(best_ms) and best in r["best_ties"]
    # prefill first, then decode; workloads in the suite's order; the launch floor makes decode's host-bound
    assert list(rows["preset"]) == ["prefill"] * 4 + ["decode"] * 4
    assert rows[rows["preset"] == "decode"]["host_bound"].all()


def test_kernel_rows_from_a_table_equal_those_from_its_analysis(h100: pd.DataFrame) -> None:
    both = results.load_results(H100).table  # h100-c and h100-d: one commit, 8 candidates each
    from_table = analysis.kernel_rows(both, commit="759FF1", machine=MACHINE)
    pd.testing.assert_frame_equal(from_table, analysis.kernel_rows(analysis.analyse(h100)))
    assert len(analysis.kernel_rows(both, commit="759ff183")) == 16
    assert analysis.kernel_rows(results.load_results(NO_KERNELS).table).empty
    assert analysis.kernel_rows(both, machine="elsewhere").empty


def test_a_tie_with_the_best_baseline_is_flagged(h100: pd.DataFrame) -> None:
    rows = analysis.kernel_rows(h100).set_index(["preset", "candidate"])
    tied = rows.loc[("prefill", "triton_rmsnorm")]  # 93.9 us vs mancg's 92.6 us: inside the 3% band
    assert tied["within_noise"] and tied["speedup_vs_best"] < 1
    # 6.62 us vs default's 5.89 us, 12% slower: outside the 10% band, and the 99% CIs do not meet
    assert not rows.loc[("prefill", "triton_cfg_blend")]["within_noise"]


def test_failed_and_skipped_candidates(cpu: pd.DataFrame) -> None:
    rows = analysis.kernel_rows(cpu).set_index("candidate")
    assert list(rows.index) == ["torch_fp32", "wrong_no_norm"]  # skipped left out
    wrong = rows.loc["wrong_no_norm"]
    assert not pd.isna(wrong["correct"]) and not wrong["correct"]
    assert wrong[["median_ms", "speedup_vs_best", "speedup_vs_eager"]].isna().all()
    assert not wrong["within_noise"] and not wrong["host_bound"]
    assert wrong["best_baseline"] == "eager"  # the run's best is still named
    everything = analysis.kernel_rows(cpu, include_skipped=True).set_index("candidate")
    assert everything.loc["triton_rmsnorm", "status"] == "skipped"
    assert pd.isna(everything.loc["triton_rmsnorm", "correct"])


def test_no_ok_mode_means_no_best_baseline_and_no_speedup(tmp_path: Path) -> None:
    cells = {**instance("prefill", "llm_rmsnorm", {"eager": None, "default": None}),
             **instance("prefill", "diff_cfg_blend", {"eager": 0.5})}
    write_result_file(tmp_path, cells, extra=candidate_results({("prefill", "llm_rmsnorm:k"): 0.1}))
    (row,) = analysis.kernel_rows(results.load_results(tmp_path).table).to_dict("records")
    assert row["correct"] and row["median_ms"] == pytest.approx(0.1)
    assert row["best_baseline"] is None and math.isnan(row["speedup_vs_best"]) and math.isnan(row["speedup_vs_eager"])


def test_asv_fillers_in_presets_not_run_are_not_failures(tmp_path: Path) -> None:
    # asv fills the combinations a new candidate adds to an existing file with null in the presets not selected
    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5}), extra=candidate_results(
        {("prefill", "llm_rmsnorm:new"): 0.4, ("decode", "llm_rmsnorm:new"): None,
         ("tiny", "llm_rmsnorm:new"): math.nan}))
    table = results.load_results(tmp_path).table
    kernels = table[table["mode"] == "kernel:new"]
    assert list(kernels["preset"].astype(str)) == ["prefill"]


def test_a_renamed_workload_s_candidates_are_ignored_with_a_warning(tmp_path: Path) -> None:
    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5}), extra=candidate_results(
        {("prefill", "llm_old_norm:k"): 0.4, ("prefill", "llm_rmsnorm:k"): 0.3}))
    loaded = results.load_results(tmp_path)
    modes = loaded.table["mode"].astype(str)
    assert list(modes[~modes.isin(MODES)]) == ["kernel:k"]
    assert len(loaded.warnings) == 1 and "'llm_old_norm:k'" in loaded.warnings[0]


# ---------------------------------------------------------------------------------------------------- summary


def test_summary_json_kernels_shape_and_values() -> None:
    data, _ = summary.summary_for(H100, machine=MACHINE)
    (run,) = data["runs"]
    for preset in ("prefill", "decode"):
        kernels = run["presets"][preset]["kernels"]
        assert [set(k) for k in kernels] == [KERNEL_KEYS] * 4
        assert {f"{k['workload']}:{k['candidate']}" for k in kernels} == H100_CANDIDATES
        assert all(k["correct"] and k["reason"] is None for k in kernels)
    expected = _independent_h100()
    for preset in ("prefill", "decode"):
        for k in run["presets"][preset]["kernels"]:
            best, best_ms, eager_ms, ms = expected[(preset, k["workload"], k["candidate"])]
            assert k["best_baseline"] == best and k["median_ms"] == pytest.approx(ms, abs=1e-6)
            assert k["speedup_vs_best"] == round(best_ms / ms, 3)
            assert k["speedup_vs_eager"] == round(eager_ms / ms, 3)
    json.dumps(data, allow_nan=False)  # plain JSON: nulls, never NaN


def test_summary_json_reports_a_wrong_kernel_as_incorrect_and_omits_skipped_ones() -> None:
    data, _ = summary.summary_for(CPU)
    kernels = {k["candidate"]: k for k in data["runs"][0]["presets"]["tiny"]["kernels"]}
    assert set(kernels) == {"torch_fp32", "wrong_no_norm"}
    wrong = kernels["wrong_no_norm"]
    assert (wrong["correct"], wrong["median_ms"], wrong["speedup_vs_best"], wrong["speedup_vs_eager"]) == (
        False, None, None, None)
    assert wrong["reason"].startswith("incorrect: ") and not wrong["within_noise"]
    assert kernels["torch_fp32"]["correct"] and kernels["torch_fp32"]["speedup_vs_best"] > 0


def test_a_failed_kernel_without_a_cell_store_is_still_never_fast(tmp_path: Path) -> None:
    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": 0.2}),
                      extra=candidate_results({("prefill", "llm_rmsnorm:bad"): None,
                                               ("prefill", "llm_rmsnorm:good"): 0.1}))
    data, _ = summary.summary_for(tmp_path)
    kernels = {k["candidate"]: k for k in data["runs"][0]["presets"]["prefill"]["kernels"]}
    assert kernels["bad"]["correct"] is False and kernels["bad"]["speedup_vs_best"] is None
    assert kernels["bad"]["reason"] == results.NO_REASON
    assert (kernels["good"]["speedup_vs_best"], kernels["good"]["speedup_vs_eager"]) == (2.0, 5.0)
    assert data["runs"][0]["presets"]["prefill"]["wins"]["default"] == 1


def test_presets_without_kernels_have_an_empty_list() -> None:
    data, _ = summary.summary_for(NO_KERNELS)
    assert all(p["kernels"] == [] for p in data["runs"][0]["presets"].values())


def test_text_and_markdown_summaries_have_the_kernels_block() -> None:
    text = summary.render_text(H100, machine=MACHINE)
    assert max(len(line) for line in text.splitlines()) <= summary.WIDTH
    assert "  kernels vs best baseline:\n" in text
    words = " ".join(text.split())  # lines wrap at 100 columns
    # slower reads as the inverse (1 / 0.9857 = 1.0145): prefill, 93.9 us against mancg's 92.6 us
    assert ("llm_rmsnorm triton_rmsnorm: 1.01x slower than best (max-autotune-no-cudagraphs), 5.31x faster than "
            "eager; within noise") in words
    assert ("diff_cfg_blend triton_cfg_blend: 1.12x slower than best (default), 1.6x faster than eager; "
            "host-bound") in words
    # decode: 4.768 us, the same median as default's
    assert ("diff_cfg_blend torch_lerp: as fast as best (default), 2.07x faster than eager; within noise, "
            "host-bound") in words
    # h100-c's prefill blend kernel: 5.92 us against default's 6.05 us, faster inside the band
    assert ("diff_cfg_blend triton_cfg_blend: 1.02x faster than best (default), 2.09x faster than eager; within "
            "noise, host-bound") in " ".join(summary.render_text(H100, machine="h100-c").split())
    data, _ = summary.summary_for(CPU)
    md = summary.render(data, "md")
    assert "Kernels vs best baseline:" in md
    assert "- llm_rmsnorm `wrong_no_norm`: failed, not counted: incorrect: output 0 differs from eager" in md
    assert "triton_rmsnorm" not in md  # skipped
    assert "kernels vs best baseline" not in summary.render_text(NO_KERNELS)


def test_kernel_line_for_each_case() -> None:
    base = {"workload": "w", "candidate": "k", "median_ms": 0.5, "best_baseline": "default", "speedup_vs_best": 1.02,
            "speedup_vs_eager": 5.4, "correct": True, "within_noise": False, "host_bound": False, "reason": None}
    assert summary.kernel_line(base) == "w k: 1.02x faster than best (default), 5.4x faster than eager"
    assert summary.kernel_line({**base, "best_baseline": "eager", "speedup_vs_eager": 1.02}) == \
        "w k: 1.02x faster than best (eager)"
    assert summary.kernel_line({**base, "speedup_vs_best": 0.8, "speedup_vs_eager": 0.25}) == \
        "w k: 1.25x slower than best (default), 4x slower than eager"
    assert summary.kernel_line({**base, "speedup_vs_best": 1.0004}).startswith("w k: as fast as best (default)")
    assert summary.kernel_line({**base, "speedup_vs_best": None, "speedup_vs_eager": None, "best_baseline": None}) \
        == "w k: 0.5 ms, no baseline to compare with (no mode measured ok and ranked)"
    assert summary.kernel_line({**base, "within_noise": True, "host_bound": True}).endswith(
        "; within noise, host-bound")
    # the quickstart's "1.46x faster than best (eager)" of a kernel whose own samples spread 42%: said
    assert summary.kernel_line({**base, "host_bound": True}, too_noisy=True).endswith(
        "; too noisy to judge, host-bound")


# ---------------------------------------------------------------------------------------------------- report


class KernelTables(HTMLParser):
    """The report's kernel tables: (table id, "workload:name") -> status, row title and cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.table = ""
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}
        self._row: dict[str, Any] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "div" and a.get("class") == "kernels":
            self.table = a["id"]
        elif tag == "tr" and "data-kernel" in a:
            self._row = {"status": a["data-status"], "title": a["title"], "cells": []}
            self.rows[(self.table, a["data-kernel"])] = self._row
        elif tag in ("td", "th") and self._row is not None:
            self._text = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None:
            self._row["cells"].append(" ".join("".join(self._text).split()))
        elif tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        self._text.append(data)


@pytest.fixture(scope="module")
def h100_page(h100: pd.DataFrame) -> str:
    return report.build_page(h100)


def test_report_has_a_kernels_table_per_preset(h100_page: str) -> None:
    parser = KernelTables()
    parser.feed(h100_page)
    tables = {t for t, _ in parser.rows}
    assert tables == {"h100-d-prefill-kernels", "h100-d-decode-kernels"}
    decode = {k: v for (t, k), v in parser.rows.items() if t == "h100-d-decode-kernels"}
    assert set(decode) == H100_CANDIDATES
    fp32 = decode["llm_rmsnorm:torch_fp32"]
    # instance, kernel, median, best baseline, vs best, vs eager: 34.5 us against mancg's 4.99 us, eager's 23.5 us
    assert fp32["cells"] == ["llm_rmsnorm", "torch_fp32 host-bound", "34.5 µs", "max-autotune-no-cudagraphs 5.0 µs",
                             f"0.14{X}", f"0.68{X}"]
    tied = parser.rows[("h100-d-prefill-kernels", "llm_rmsnorm:triton_rmsnorm")]
    assert tied["cells"][4] == f"≈ 0.99{X}" and "within noise" in tied["title"]
    assert 'data-mode="kernel:' not in h100_page  # never a column of the modes' table


def test_report_shows_wrong_and_skipped_kernels_with_their_reasons(cpu: pd.DataFrame) -> None:
    parser = KernelTables()
    parser.feed(report.build_page(cpu))
    rows = {k: v for (_, k), v in parser.rows.items()}
    assert [v["status"] for v in rows.values()] == ["ok", "skipped", "failed"]
    wrong = rows["llm_rmsnorm:wrong_no_norm"]
    assert wrong["cells"][2].startswith("failed, not counted incorrect: output 0 differs from eager")
    assert X not in "".join(wrong["cells"])  # no speedup at all
    assert rows["llm_rmsnorm:triton_rmsnorm"]["cells"][2] == (
        "skipped: candidate llm_rmsnorm:triton_rmsnorm runs on cuda only, not on cpu")
    assert rows["llm_rmsnorm:torch_fp32"]["cells"][3].startswith("eager ")


def test_report_without_kernels_has_no_kernels_section(tmp_path: Path) -> None:
    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": 0.2}))
    page = report.build_page(results.load_results(tmp_path).table)
    assert 'class="kernels"' not in page
