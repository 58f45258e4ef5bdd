"""The report: the analysis' verdicts in the table (best, ties, failures with reasons, host-bound), the same wins
and geomeans as `summary`, % of peak from declared work and datasheet peaks, real plots, nothing external."""

from __future__ import annotations

import functools
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from test_publish import OOM, OOM_REASON, make_results
from test_results import instance, write_result_file

from tracker import cli
from tracker.publish import report, roofline
from tracker.publish.summaryjson import summary_json
from tracker.store import results
from workloads import presets, registry

H100 = "NVIDIA H100 80GB HBM3"


# --- peaks and throughput ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("gpu", "name"), [
    (H100, "H100 SXM5 80GB"), ("NVIDIA H200", "H200 SXM 141GB"), ("NVIDIA H100 PCIe", None),
    ("NVIDIA H100 NVL", None), ("NVIDIA H200 NVL", None), ("cpu", None), (None, None),
])
def test_gpu_peaks_match_exact_products_only(gpu: str | None, name: str | None) -> None:
    peak = roofline.gpu_peak(gpu)
    assert (peak.name if peak else None) == name


def test_h100_and_h200_datasheet_figures() -> None:
    h100, h200 = roofline.gpu_peak(H100), roofline.gpu_peak("NVIDIA H200")
    assert (h100.bandwidth, h100.flops) == (3.35e12, 989.4e12)
    assert (h200.bandwidth, h200.flops) == (4.8e12, 989.4e12)
    assert "datasheet" in h100.source and "datasheet" in h200.source


def test_throughput_shows_the_bounding_resource() -> None:
    peak = roofline.gpu_peak(H100)
    memory = roofline.throughput(roofline.Work(flops=1e6, bytes=3.35e9), 1.0, peak)  # 3.35 GB in 1 ms
    assert memory.text == "3.35 TB/s" and memory.pct_of_peak == pytest.approx(100.0)
    compute = roofline.throughput(roofline.Work(flops=989.4e9 / 2, bytes=1e6), 1.0, peak)
    assert compute.text == "495 TFLOP/s" and compute.pct_of_peak == pytest.approx(50.0)
    cpu = roofline.throughput(roofline.Work(flops=1e6, bytes=1e6), 1.0, None)
    assert cpu.pct_of_peak is None and cpu.text == "1 GB/s"
    assert roofline.throughput(None, 1.0, peak) is None
    assert roofline.throughput(roofline.Work(1, 1), None, peak) is None


def test_declared_work_is_the_registrys() -> None:
    p = presets.get_preset("prefill")
    w = registry.get("llm_swiglu_mlp")
    declared = roofline.declared_work("llm_swiglu_mlp", "prefill")
    assert declared == roofline.Work(float(w.flops(p)), float(w.min_bytes(p)))
    assert roofline.declared_work("not_a_workload", "prefill") is None


# --- the page built from a results directory ----------------------------------------------------------------

class Cells(HTMLParser):
    """The report's table cells: (preset, workload, mode) -> class and title; plus chips and svgs."""

    def __init__(self) -> None:
        super().__init__()
        self.preset = self.workload = ""
        self.cells: dict[tuple[str, str, str], dict[str, str]] = {}
        self.chips: dict[tuple[str, str], str] = {}
        self.svgs = 0
        self.host_bound: set[tuple[str, str]] = set()
        self._chip: tuple[str, str] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "section" and "data-preset" in a:
            self.preset = a["data-preset"]
        elif tag == "tr" and "data-workload" in a:
            self.workload = a["data-workload"]
        elif tag == "td" and "data-mode" in a and "cell" in a.get("class", "").split():
            key = (self.preset, self.workload, a["data-mode"])
            self.cells[key] = {"class": a["class"], "title": a.get("title", "")}
        elif tag == "div" and "chip" in a.get("class", "") and "data-mode" in a:
            self._chip, self._text = (self.preset, a["data-mode"]), []
        elif tag == "svg":
            self.svgs += 1
        elif tag == "span" and a.get("class") == "hostb":
            self.host_bound.add((self.preset, self.workload))

    def handle_data(self, data: str) -> None:
        if self._chip:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._chip:
            self.chips[self._chip] = " ".join("".join(self._text).split())
            self._chip = None


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("report")
    results_dir = make_results(root)
    assert report.write_report(results_dir, root / "out", asv_index="../index.html", warn=print) > 0
    html = (root / "out" / "index.html").read_text(encoding="utf-8")
    parsed = Cells()
    parsed.feed(html)
    table = results.load_results(results_dir).table
    summary = summary_json(table)
    # the latest run: the last commit date and, of the two PyTorch versions measured at it, the newer
    latest = next(r for r in summary["runs"] if r["commit"] == "2" * 40 and r["torch"] == "2.10.0")
    return {"html": html, "parsed": parsed, "table": table, "latest": latest}


def test_best_and_ties_are_the_analysis_verdicts(built: dict[str, Any]) -> None:
    latest = built["latest"]
    assert "torch</dt><dd>2.10.0" in built["html"]
    cells = built["parsed"].cells
    for preset, figures in latest["presets"].items():
        for workload, winner in figures["winners"].items():
            best = [m for (p, w, m), c in cells.items() if (p, w) == (preset, workload) and "best" in c["class"]]
            assert best == [winner], (preset, workload)
        for workload, tie in figures["ties"].items():
            tied = {m for (p, w, m), c in cells.items() if (p, w) == (preset, workload) and "tie" in c["class"]}
            assert tied == set(tie) - {figures["winners"][workload]}
    assert figures  # the fixture has ties: llm_rmsnorm's two max-autotune modes run the same time
    assert latest["presets"]["prefill"]["ties"]["llm_rmsnorm"]


def test_wins_and_geomeans_are_the_summarys(built: dict[str, Any]) -> None:
    latest = built["latest"]
    for preset, figures in latest["presets"].items():
        for mode, wins in figures["wins"].items():
            chip = built["parsed"].chips[(preset, mode)]
            assert f"{wins} win{'' if wins == 1 else 's'}" in chip.split(mode, 1)[1]  # "1 win", never "1 wins"
            geo = figures["geomean_vs_eager"].get(mode)
            if geo is not None:
                assert f"{geo:.3f}\N{MULTIPLICATION SIGN}" in chip


def test_a_count_reads_in_the_singular_when_it_is_one(tmp_path: Path) -> None:
    """A run of one instance: "1 instance with a winner" and "1 win", never "1 instances" or "1 wins"."""
    write_result_file(tmp_path / "results", instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": 0.3}))
    assert cli.main(["report", "--results-dir", str(tmp_path / "results"), "--out", str(tmp_path / "out")]) == 0
    html = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "1 instance with a winner" in html and ">1 win<" in html
    assert "1 instances" not in html and "1 wins" not in html


def test_an_instance_no_mode_won_says_no_winner_not_nan(tmp_path: Path) -> None:
    """An instance whose modes all failed (the quickstart's, whose cells were all too noisy, alike) has no winner: its
    best column says so, never "nan"."""
    cells = instance("prefill", "llm_rmsnorm", {"eager": None, "default": None})
    cells |= instance("prefill", "llm_layernorm", {"eager": 0.5, "default": 0.3})
    write_result_file(tmp_path / "results", cells)
    assert cli.main(["report", "--results-dir", str(tmp_path / "results"), "--out", str(tmp_path / "out")]) == 0
    html = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    best = re.findall(r'<td class="best-col">(.*?)</td>', html, flags=re.S)
    assert len(best) == 2 and '<span class="none">no winner</span>' in best[0] and "nan" not in best[0]


def test_failed_cell_says_why_on_hover(built: dict[str, Any]) -> None:
    cell = built["parsed"].cells[OOM]
    assert "failed" in cell["class"].split()
    assert OOM_REASON in cell["title"]


def test_cells_carry_speedup_and_percent_of_peak(built: dict[str, Any]) -> None:
    cell = built["parsed"].cells[("prefill", "llm_swiglu_mlp", "max-autotune")]
    assert re.search(r"\dx eager", cell["title"])
    assert "% of peak" in cell["title"] and "compile " in cell["title"] and "MiB" in cell["title"]
    assert "H100 Tensor Core GPU datasheet" in built["html"]


def test_host_bound_instances_are_flagged(built: dict[str, Any]) -> None:
    host = {(p, w) for p, f in built["latest"]["presets"].items() for w in f["host_bound"]}
    assert host and built["parsed"].host_bound == host


def test_metadata_and_plots(built: dict[str, Any]) -> None:
    html = built["html"]
    for text in ("570.124.06", "12.8", "2.10.0", "3.4.0", "6.5 µs", "h100-test", "2" * 12):
        assert text in html
    # per preset: over commits, across versions, heat strip, compile cost
    assert built["parsed"].svgs == 2 * 4
    for title in ("over commits", "across PyTorch versions", "best mode per instance", "compile time and peak"):
        assert title in html
    assert "geomean speedup vs eager (x)" in html and "compile time (s)" in html  # labelled axes with units


def test_self_contained(built: dict[str, Any]) -> None:
    html = built["html"]
    assert not re.search(r"<(script|img|iframe)\b", html)  # styles and plots are inline
    assert re.findall(r"<link\b[^>]*>", html) == [m for m in re.findall(r"<link\b[^>]*>", html) if 'href="data:' in m]
    assert not re.search(r'\bsrc="', html)
    assert not re.search(r"url\((?!#)", html)  # only the SVGs' own clip paths


@pytest.mark.slow
def test_standalone_report_has_no_asv_links(tmp_path: Path) -> None:
    results_dir = make_results(tmp_path)
    assert cli.main(["report", "--results-dir", str(results_dir), "--out", str(tmp_path / "out")]) == 0
    html = (tmp_path / "out" / "index.html").read_text()
    assert "index.html#" not in html and "asv history" not in html


def test_empty_results_dir_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    with pytest.raises(results.ResultsError, match="no asv result files"):
        report.write_report(tmp_path / "results", tmp_path / "out", warn=print)


# --- plots ------------------------------------------------------------------------------------------------

def test_history_plot_draws_a_line_style_per_torch_version() -> None:
    from tracker.publish import plots

    nan = float("nan")
    wins = {"2.10.0": {"eager": [0, 1, nan], "default": [3, 2, 4]}, "2.9.1": {"eager": [1, nan, 1],
                                                                              "default": [2, 3, 3]}}
    geo = {v: {"default": [1.2, 1.3, 1.25]} for v in wins}
    svg = plots.series_plot(["aaaaaaa", "bbbbbbb", "ccccccc"], wins, geo, "commit, oldest to newest", "t: over")
    assert svg.startswith('<svg role="img" aria-label="t: over" class="plot"')
    for text in ("torch 2.10.0", "torch 2.9.1", "eager = 1.0", "instances won (count)", "bbbbbbb"):
        assert text in svg
    assert "stroke-dasharray" in svg  # the second version's dashed lines


def test_heat_strip_one_per_version_and_deterministic() -> None:
    from tracker.publish import plots

    strips = [plots.Strip("torch 2.10.0", [["default", None]], [[True, False]]),
              plots.Strip("torch 2.9.1", [["eager", "max-autotune"]], [[False, False]])]
    args = (["llm_rmsnorm"], ["aaaaaaa", "bbbbbbb"], strips, list(report.MODES), "commit", "best mode")
    svg = plots.heat_strip(*args)
    assert "torch 2.10.0" in svg and "torch 2.9.1" in svg and "tie within noise" in svg
    assert svg == plots.heat_strip(*args)  # same data, same page


# --- on the committed real runs -----------------------------------------------------------------------------

FIXTURES = Path(__file__).resolve().parent / "fixtures"
H100_RUNS = FIXTURES / "h100-aa2" / "results"  # two full H100 runs of one commit, machines h100-c and h100-d


@functools.cache
def _page(results_dir: Path) -> str:  # built once for the tests that read it (the H100 page takes seconds)
    return report.build_page(results.load_results(results_dir).table,
                             machine_info=report.machine_files(results_dir))


@pytest.mark.slow
def test_the_page_names_the_timer_that_timed_the_cells() -> None:
    cpu = _page(FIXTURES / "cpu-tiny" / "results")  # gpu "cpu", triton none: the harness' CPU timer
    lead = re.search(r'<p class="lead">(.*?)</p>', cpu, re.S).group(1)
    assert "a CPU timer" in lead and "do_bench</code>" not in lead
    gpu = _page(H100_RUNS)
    lead = re.search(r'<p class="lead">(.*?)</p>', gpu, re.S).group(1)
    assert "<code>triton.testing.do_bench</code>" in lead and "CPU timer" not in lead


def test_head_to_head_chip_says_not_measured_without_both_modes() -> None:
    cpu = _page(FIXTURES / "cpu-tiny" / "results")  # eager + default only
    chip = re.search(r'<div class="chip h2h".*?</div>', cpu, re.S).group(0)
    assert "not measured" in chip and "0 : 0" not in chip
    chip = re.search(r'<div class="chip h2h".*?</div>', _page(H100_RUNS), re.S).group(0)
    assert "not measured" not in chip


def test_compile_break_even_table_per_preset() -> None:
    page = _page(H100_RUNS)  # a table per machine; these figures are h100-d's run
    table = re.search(r'id="h100-d-prefill-breakeven".*?</table>', page, re.S).group(0)
    row = re.search(r'<tr data-workload="llm_kl_divergence_loss">.*?</tr>', table, re.S).group(0)
    # calls = compile s / (eager - mode) per call: default 3.226 s / (12.817 - 5.107) ms
    assert [re.sub(r"<.*?>", "", c) for c in re.findall(r"<td.*?</td>", row, re.S)] == ["419", "902", "4.87k",
                                                                                           "1.8k"]
    row = re.search(r'<tr data-workload="llm_topk_sampling_prep">.*?</tr>', table, re.S).group(0)
    assert row.count("never") == 4  # every compiled mode slower than eager's 9.89 ms (mancg 9.95 ms)
    assert "cold or warm" in table
