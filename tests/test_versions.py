"""compare and the report across torch versions: the study's published results (torch 2.9.1, imported) against our
H100 runs (torch 2.11.0+cu130) on the same GPU, the runs picked by version; the headline names the versions, the
notes say where the two were measured differently and which moved cells that can explain, and the report shows the
best mode and the geomeans by version."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from comparecli import run_compare

from tracker.analyse import best as analysis
from tracker.analyse.changes import Comparison
from tracker.analyse.compare import UNKNOWN, compare_runs, compare_versions
from tracker.analyse.pairs import CompareError
from tracker.errors import UsageError
from tracker.publish.comparetable import render_table
from tracker.publish.comparison import comparison_json
from tracker.publish.prcomment import headline, render_comment
from tracker.publish.report import build_page, build_sections
from tracker.stats import HostBound
from tracker.store import results, studycsv

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
STUDY_CSV = FIXTURES / "study" / "raw_results.csv"
OURS = FIXTURES / "h100-aa2"  # two full runs of one commit, torch 2.11.0+cu130, the grown flush (cells record it)
H100 = "h100-d"  # its later run, which compare takes as head; the study is imported under its machine name
HEAD = "759ff183dcd5bdaec5fa61a7f55acb9f10b761ee"  # the commit of both runs
PLAIN = FIXTURES / "h100-plain-flush"  # one full run, torch 2.11.0+cu130, do_bench's plain 256 MiB flush
PLAIN_MACHINE, PLAIN_COMMIT = "h100-sxm-dev", "54a7e4061a564f1ed584119c6220cd0641828be5"
GPU = "NVIDIA H100 80GB HBM3"
MANCG = "max-autotune-no-cudagraphs"
STUDY_DATE = 1_765_756_800_000  # 2025-12-15: before both H100 runs


def _import_study(results: Path, machine: str, **kw: Any) -> None:
    args: dict[str, Any] = {"gpu": GPU, "cuda": "13.0", "date_ms": STUDY_DATE} | kw
    studycsv.import_csv(STUDY_CSV, results, machine=machine, torch="2.9.1", **args)


def _ours(root: Path) -> Path:
    """A scratch copy of h100-aa2's results and, beside them, its cell store (how each cell was flushed)."""
    shutil.copytree(OURS / "results", root / "results")
    shutil.copytree(OURS / "cells", root / "cells")
    return root / "results"


@pytest.fixture(scope="module")
def h100(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/fixtures/h100-aa2's results with the study imported on h100-d's machine name as torch 2.9.1."""
    results = _ours(tmp_path_factory.mktemp("versions"))
    _import_study(results, H100)
    return results


@pytest.fixture(scope="module")
def study_vs_ours(h100: Path) -> Comparison:
    return compare_versions(h100, "2.9.1", "2.11")


def test_head_is_the_latest_run_of_its_version_and_base_the_nearest_of_the_other(study_vs_ours: Comparison) -> None:
    c = study_vs_ours
    assert (c.head.commit, c.head.torch, c.base.torch) == (HEAD, "2.11.0+cu130", "2.9.1")
    assert c.notes[0] == (f"runs picked by torch version: head 759ff183 on {H100} (torch 2.11.0+cu130, its latest "
                          f"run), base {c.base.commit[:8]} on {H100} (torch 2.9.1, the nearest run by date (no run "
                          "of head's commit has it))")


def test_a_run_of_the_same_commit_is_preferred_to_the_nearest(tmp_path: Path) -> None:
    results = _ours(tmp_path)
    _import_study(results, H100)  # nearer by date than the one below, but another commit
    _import_study(results, H100, commit=HEAD, date_ms=STUDY_DATE - 86_400_000)
    c = compare_versions(results, "2.9.1", "2.11.0")
    assert (c.base.commit, c.base.torch, c.head.commit, c.head.torch) == (HEAD, "2.9.1", HEAD, "2.11.0+cu130")
    assert c.notes[0].endswith("(torch 2.9.1, the same commit)")


def test_the_headline_names_both_versions_head_first(study_vs_ours: Comparison) -> None:
    c = study_vs_ours
    assert headline(c).startswith("torch 2.11.0+cu130 vs 2.9.1 · ")
    assert render_comment(c).splitlines()[2].startswith("### compile-baselines: torch 2.11.0+cu130 vs 2.9.1 · ")
    assert render_table(c).splitlines()[0] == (f"compare {c.base.commit[:8]} -> 759ff183 on {H100} · {GPU} · "
                                               "torch 2.9.1 -> 2.11.0+cu130 · triton unknown -> 3.6.0")


def test_cells_that_moved_without_samples_on_one_side_are_counted_never_hidden(study_vs_ours: Comparison) -> None:
    # the study kept medians only: a move beyond the band of a cell of one compile a side cannot be tested, and is
    # said, not dropped
    c = study_vs_ours
    moved = [x for x in c.cells if x.verdict == UNKNOWN]
    assert moved and all(x.compiles == (1, 1) for x in moved)
    assert f" · {len(moved)} cells moved beyond noise bands, unjudged (no samples)" in headline(c)
    # prefill llm_rmsnorm default: 116.1 us in the study, 96.4 us in h100-d's run
    x = next(x for x in moved if (x.preset, x.workload, x.mode) == ("prefill", "llm_rmsnorm", "default"))
    assert round(x.base_ms * 1000, 1) == 116.1 and round(x.head_ms * 1000, 1) == 96.4


def test_a_cell_of_several_compiles_is_judged_on_them_without_the_studys_samples(study_vs_ours: Comparison) -> None:
    # prefill llm_rope_apply max-autotune-no-cudagraphs: 147 us in the study, three compiles of 108-108.3 us in ours
    c = study_vs_ours
    x = next(x for x in c.improvements if (x.preset, x.workload, x.mode) == ("prefill", "llm_rope_apply", MANCG))
    assert x.compiles == (1, 3) and round(x.base_ms * 1000) == 147 and round(x.head_ms * 1000) == 108
    # every cell judged without the study's samples is judged against the noise of our three compiles: the study's
    # median against their mean (docs/versions.md names the six and why they are believable)
    assert len(c.improvements + c.regressions) == 6
    assert all(x.compiles == (1, 3) and x.ci is not None for x in c.improvements + c.regressions)
    best = {(i.preset, i.workload): i for i in c.best_changes}
    assert set(best) == {("prefill", "llm_rope_apply"), ("prefill", "llm_label_smoothed_ce_loss"),
                         ("prefill", "vlm_contrastive_nce_loss")}
    assert (best[("prefill", "llm_rope_apply")].base_best, best[("prefill", "llm_rope_apply")].head_best) == (
        "default", MANCG)
    # the study's 41.1 us against our three compiles' 31.3-33.2 us (-21%): mancg now wins beyond noise
    nce = best[("prefill", "vlm_contrastive_nce_loss")]
    assert (nce.base_best, nce.head_best) == ("max-autotune", MANCG) and nce.ratio < 0.8
    # the label-smoothed loss kept its winner (max-autotune-no-cudagraphs), whose own cell moved: its best latency
    assert best[("prefill", "llm_label_smoothed_ce_loss")].reason == "best latency faster"


def test_an_unrecorded_launch_floor_is_a_method_difference_and_host_bound_moves_are_marked(
        study_vs_ours: Comparison) -> None:
    c = study_vs_ours
    launch = c.head.launch_us
    assert c.base.launch_us is None and launch is not None
    assert f"launch floor recorded only at head ({launch:.2f} us): the other host's is unknown" in c.notes
    # moved: unjudged (one compile a side) or judged significant (on our side's compiles)
    moved = [x for x in c.cells if x.verdict == UNKNOWN or x.significant]
    marked = [x for x in moved if x.method]
    assert 0 < len(marked) < len(moved)
    host = HostBound()
    for x in moved:  # marked exactly when host-bound at the known floor
        assert x.method == bool(host.bound(min(x.base_ms, x.head_ms), launch)), x
    assert not any(x.method for x in c.cells if x not in moved)
    assert (f"{len(marked)} of the {len(moved)} cells that moved beyond their band are host-bound (at most 6 x the "
            f"{launch:.2f} us launch floor): the difference in method alone can explain their change (marked method)"
            ) in c.notes
    assert "unknown [method]" in render_table(c)
    assert "· *method*" in render_comment(c)
    assert sum(x["method"] for x in comparison_json(c)["cells"]) == len(marked)


def test_the_grown_flush_against_the_studys_plain_flush_is_noted(study_vs_ours: Comparison) -> None:
    # h100-aa2's cells, measured with the grown flush, record flush_mib in their cell store (copied beside)
    assert ("L2 flush differs: no flush recorded (do_bench's plain 256 MiB L2 flush, as the study's) (base) vs "
            "grown L2 flush (256-2048 MiB) (head)") in study_vs_ours.notes


def test_the_same_method_gives_no_flush_note(tmp_path: Path) -> None:
    # tests/fixtures/h100-plain-flush was measured with do_bench's plain flush too, and records none: nothing to say
    shutil.copytree(PLAIN / "results", tmp_path / "results")
    _import_study(tmp_path / "results", PLAIN_MACHINE)
    c = compare_versions(tmp_path / "results", "2.9.1", "2.11")
    assert c.head.commit == PLAIN_COMMIT and not any(n.startswith("L2 flush") for n in c.notes)


def test_another_gpu_is_refused_unless_asked_and_then_noted(tmp_path: Path) -> None:
    results = _ours(tmp_path)
    _import_study(results, H100, gpu="NVIDIA H200")
    with pytest.raises(CompareError, match=r"gpu NVIDIA H200 vs NVIDIA H100 80GB HBM3.*--allow-cross-versions"):
        compare_versions(results, "2.9.1", "2.11")
    c = compare_versions(results, "2.9.1", "2.11", allow_cross_versions=True)
    assert f"measured on another GPU: NVIDIA H200 (base) vs {GPU} (head)" in c.notes


def test_a_version_without_runs_is_a_clear_error(h100: Path) -> None:
    with pytest.raises(CompareError, match=r"--base-torch 2\.10: no run with that torch version; results have "
                                           r"torch 2\.11\.0\+cu130 on h100-c, 2\.11\.0\+cu130 on h100-d, "
                                           rf"2\.9\.1 on {H100}"):
        compare_versions(h100, "2.10", "2.11")
    with pytest.raises(CompareError, match="select the same run"):
        compare_versions(h100, "2.9.1", "2.9")


def test_compare_main_takes_both_versions_or_neither(h100: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match="base_torch and head_torch go together"):
        run_compare(h100, None, None, base_torch="2.9.1")
    out = tmp_path / "c.json"
    assert run_compare(h100, None, None, fmt="json", out=out, base_torch="2.9.1", head_torch="2.11") == 0
    data = json.loads(out.read_text())
    assert (data["base"]["torch"], data["head"]["torch"]) == ("2.9.1", "2.11.0+cu130")
    assert (data["summary"]["unjudged"], data["summary"]["method"]) == (7, 1)  # docs/versions.md quotes them
    assert "torch 2.11.0+cu130 vs 2.9.1 · " in capsys.readouterr().err


# -- the report's version view ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sections(h100: Path) -> list[Any]:
    table = results.load_results(h100).table
    return build_sections(table, analysis.analyse(table))


@pytest.mark.slow  # the version view of two full H100 runs and the study's: ~5 s to build
def test_the_report_shows_the_best_mode_per_instance_by_torch_version(sections: list[Any]) -> None:
    (machine,) = [s for s in sections if s.machine == H100]  # h100-c has one version: no version view
    prefill = next(p for p in machine.presets if p.preset == "prefill")
    v = prefill.versions
    assert v.versions == ("2.9.1", "2.11.0+cu130") and v.commits[1] == HEAD
    best = dict(v.best)
    assert len(best) == 23
    # the study's published winners stand in its column
    assert best["vlm_contrastive_nce_loss"][0] == "max-autotune" and best["llm_topk_sampling_prep"][0] == "eager"
    assert {w for w, (m, _) in best.items() if m == "default"} == {"diff_scheduler_step", "llm_rope_apply",
                                                                   "rl_dpo_loss", "rl_grpo_loss"}
    assert v.changed(best["vlm_contrastive_nce_loss"]) == (best["vlm_contrastive_nce_loss"][1] != "max-autotune")
    decode = next(p for p in machine.presets if p.preset == "decode")
    assert len(decode.versions.best) == 18


@pytest.mark.slow  # the version view of two full H100 runs and the study's: ~5 s to build
def test_the_report_shows_the_geomean_per_mode_by_torch_version(sections: list[Any]) -> None:
    (machine,) = [s for s in sections if s.machine == H100]
    by_preset = {p.preset: dict(p.versions.geomeans) for p in machine.presets}
    # the study's column is its published geomeans
    assert {m: round(g[0], 3) for m, g in by_preset["prefill"].items()} == {
        "max-autotune-no-cudagraphs": 2.000, "default": 1.874, "max-autotune": 1.254, "reduce-overhead": 1.224}
    assert {m: round(g[0], 3) for m, g in by_preset["decode"].items()} == {
        "max-autotune-no-cudagraphs": 1.687, "default": 1.682, "reduce-overhead": 0.862, "max-autotune": 0.859}
    assert all(g[1] is not None for g in by_preset["prefill"].values())


@pytest.mark.slow
def test_the_version_view_is_rendered_and_absent_with_one_version(h100: Path, tmp_path: Path) -> None:
    html = build_page(results.load_results(h100).table)
    assert 'id="h100-d-prefill-versions"' in html and "<th>torch 2.11.0+cu130</th>" in html
    assert 'id="h100-c-prefill-versions"' not in html  # the study was imported on h100-d only
    one = _ours(tmp_path)  # two runs, one torch version
    table = results.load_results(one).table
    assert all(p.versions is None for s in build_sections(table, analysis.analyse(table)) for p in s.presets)
    assert "-versions" not in build_page(table)


# -- the worked example in docs/versions.md -----------------------------------------------------------------------


@pytest.mark.slow
def test_the_worked_example_in_docs_versions_md_is_what_the_cli_prints(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    doc = (ROOT / "docs" / "versions.md").read_text().splitlines()
    printed: set[str] = set()
    counts: dict[str, tuple[int, int, int]] = {}
    for name, fixture, machine in (("versions", OURS, H100), ("plain", PLAIN, PLAIN_MACHINE)):
        rd = tmp_path / name / "results"
        shutil.copytree(fixture / "results", rd)
        if (fixture / "cells").is_dir():
            shutil.copytree(fixture / "cells", tmp_path / name / "cells")
        imported = studycsv.import_study(STUDY_CSV, rd, machine, "2.9.1", GPU, date_ms=STUDY_DATE, cuda="13.0")
        assert imported.written.is_file()
        counts[name] = (imported.cells, imported.failed, imported.left_out)
        out = tmp_path / name / "table.txt"
        run_compare(rd, None, None, fmt="table", out=out, base_torch="2.9.1", head_torch="2.11")
        lines = out.read_text().splitlines()
        assert lines[1] in doc, name  # the headline
        printed |= set(lines)
    # imported 205 cells (0 failed, 25 decode cells of decode-invariant workloads left out), as import-csv says
    assert counts["versions"] == (205, 0, 25)
    quoted = [ln for ln in doc if ln.startswith(("compare ", "torch 2.11", "note: "))
              or (ln.startswith(" ") and " unknown" in ln) or (ln[:1] in "+-~" and ln[1:3] == "  ")]
    assert len(quoted) == 28
    for ln in quoted:  # every output line the doc quotes is one the CLI printed
        assert ln in printed, ln
    md = tmp_path / "c.md"
    run_compare(tmp_path / "versions" / "results", None, None, fmt="md", out=md, only_changed=True,
                 base_torch="2.9.1", head_torch="2.11")
    rows = [ln for ln in md.read_text().splitlines() if ln.startswith(("| prefill |", "| decode |"))]
    assert len(rows) == 10 and all(r in doc for r in rows)


def test_one_torch_version_measured_two_ways_is_a_method_difference(tmp_path: Path) -> None:
    # the same torch, GPU and driver: tests/fixtures/h100-plain-flush against tests/fixtures/h100-smoke (grown)
    rd = tmp_path / "results"
    shutil.copytree(PLAIN / "results", rd)
    shutil.copytree(FIXTURES / "h100-smoke" / "results" / "h100-smoke", rd / "h100-smoke")
    shutil.copytree(FIXTURES / "h100-smoke" / "cells", tmp_path / "cells")
    c = compare_runs(rd, PLAIN_COMMIT, "44379fbf", PLAIN_MACHINE, head_machine="h100-smoke")
    assert c.base.torch == c.head.torch and headline(c).startswith(("No change", "Best", "significant"))
    assert ("L2 flush differs: no flush recorded (do_bench's plain 256 MiB L2 flush, as the study's) (base) vs "
            "grown L2 flush (256-2048 MiB) (head)") in c.notes
    assert "> **Method differs**" in render_comment(c)
    # of these real runs, one cell moved beyond its band, a GPU-bound one: nothing for the method to explain
    assert any(n.startswith("0 of the 1 cells that moved beyond their band are host-bound") for n in c.notes)
    host = HostBound()
    for x in c.cells:
        moved = x.significant or x.verdict == UNKNOWN
        assert x.method == (moved and bool(host.bound(min(x.base_ms, x.head_ms), max(c.base.launch_us,
                                                                                      c.head.launch_us)))), x


CPU_VERSIONS = FIXTURES / "cpu-versions" / "results"  # torch 2.9.1 and 2.13.0 measured here (its PROVENANCE.md)


def test_two_versions_measured_on_the_cpu_compare_by_version_and_say_they_cannot_be_judged() -> None:
    c = compare_versions(CPU_VERSIONS, "2.9.1", "2.13")
    assert (c.base.torch, c.head.torch) == ("2.9.1+cu128", "2.13.0+cpu") and c.base.commit == c.head.commit
    assert "the same commit" in c.notes[0]
    assert len(c.cells) == 10 and len(c.noisy) == 10 and not c.changed  # tiny CPU timings spread over 20%
    assert headline(c) == "torch 2.13.0+cpu vs 2.9.1+cu128 · No change found · 10 cells too noisy to judge"
