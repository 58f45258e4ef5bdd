"""The baseline to beat, per instance, in the summary (JSON, text, markdown) and the HTML report: the winner's best
compile, how many compiles it is the best of, their median, and the runner-up; "1 compile" when it had one.

Several compiles: real H100 cold compiles (tests/fixtures/h100-compiles, rep5-rep7: three runs of the same 18 cells
at one commit) recorded as three replicates of one run through the real cell store and asv writer. That grouping is
constructed: the three compiles of a cell came from three runs, where the runner would make them in one. Real runs
that recorded their compiles as the runner makes them: tests/fixtures/h100-aa2's h100-d (three compiles in most
cells of the autotuned modes and in those its confirmation re-measured, one elsewhere). A run that recorded none:
tests/fixtures/h100-smoke's (an older runner).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_publish import _benchmark

from tracker import metrics
from tracker.measure.cellresult import CellResult
from tracker.publish import report, summary
from tracker.publish.target import Target, target_text
from tracker.store import asvfiles
from tracker.store.cells import CellStore, RunKey

ROOT = Path(__file__).resolve().parent.parent
COMPILES = ROOT / "tests" / "fixtures" / "h100-compiles"
REPS = ("rep5", "rep6", "rep7")
H100 = ROOT / "tests" / "fixtures" / "h100-aa2" / "results"  # its run on h100-d is read here
SMOKE = ROOT / "tests" / "fixtures" / "h100-smoke" / "results"  # recorded no compiles
MACHINE, COMMIT = "h100-compiles", "7c9e0e6" + "0" * 33


def stored_cells(rep: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((COMPILES / rep).glob("*/*/*/*/*/*.json"))]


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of the 18 cells, each with three compiles (the replicates rep5-rep7), written as the runner does."""
    root = tmp_path_factory.mktemp("target")
    rd = root / "results"
    conf = asvfiles.load_conf(ROOT / "asv.conf.json", str(rd))
    from asv.benchmarks import Benchmarks

    benchmarks = Benchmarks(conf, [_benchmark(asvfiles.METRIC_BENCHMARKS[m.name], m.unit)
                                   for m in metrics.METRICS.values()]
                            + [_benchmark(asvfiles.HOST_BENCHMARK, "us", params=False)])
    rd.mkdir()
    benchmarks.save()
    first = stored_cells(REPS[0])
    store = CellStore(root / "cells", RunKey(MACHINE, COMMIT, first[0]["host"]["torch"]))
    for r, rep in enumerate(REPS, start=1):
        for cell in stored_cells(rep):
            store.put(CellResult.from_json({**cell, "replicate": r}))
    cells = store.cells()  # replicates combined: the best compile stands for the cell
    entry = {"machine": MACHINE, "os": "Linux", "arch": "x86_64", "cpu": "test CPU", "num_cpu": "16", "ram": "1",
             **{k: first[0]["host"][k] for k in ("gpu", "driver", "cuda", "torch", "triton")}}
    env = SimpleNamespace(name="existing-py", python=sys.executable, env_vars={})
    results = asvfiles.open_results(conf, env, entry, COMMIT, 1_795_000_000_000)
    asvfiles.record_cells(results, benchmarks, cells)
    asvfiles.save_results(conf, results, entry)
    return rd


def medians(preset: str, workload: str, mode: str) -> list[float]:
    """The stored medians of a cell's three compiles, read from the fixture itself."""
    return [c["median_ms"] for rep in REPS for c in stored_cells(rep)
            if (c["preset"], c["workload"], c["mode"]) == (preset, workload, mode)]


def test_the_target_is_the_best_of_the_winners_compiles_with_their_median_and_the_runner_up(results_dir: Path) -> None:
    data, _ = summary.summary_for(results_dir)
    (run,) = data["runs"]
    for preset, p in run["presets"].items():
        assert set(p["targets"]) == set(p["winners"])
        for workload, t in p["targets"].items():
            assert t["mode"] == p["winners"][workload]
            ms = medians(preset, workload, t["mode"])
            assert t["compiles"] == len(ms) == 3
            assert t["ms"] == pytest.approx(min(ms), rel=1e-6)
            assert t["compiles_median_ms"] == pytest.approx(statistics.median(ms), rel=1e-6)
            assert t["compiles_max_ms"] == pytest.approx(max(ms), rel=1e-6)
            # the runner-up is another mode, its own best compile no faster than the winner's
            assert t["runner_up"] != t["mode"]
            assert t["runner_up_ms"] == pytest.approx(min(medians(preset, workload, t["runner_up"])), rel=1e-6)
            assert t["runner_up_ms"] >= t["ms"]


def test_text_markdown_and_report_say_it_in_the_same_words(results_dir: Path) -> None:
    data, _ = summary.summary_for(results_dir)
    (run,) = data["runs"]
    targets = {(preset, w): Target.from_json(t) for preset, p in run["presets"].items()
               for w, t in p["targets"].items()}
    md = summary.render(data, "md")
    text = summary.render(data, "table")
    html = report.build_page(report.results.load_results(results_dir).table)
    for (_, workload), t in targets.items():
        words = target_text(t)
        assert words.startswith(f"beat {t.ms * 1000:#.4g} us: the best of 3 compiles of {t.mode} (median ")
        assert f"- {workload}: {words}\n" in md
        assert f"{workload}: beat " in text
        assert target_text(t, micro="µs") in html
    assert "baseline to beat:" in text and max(len(line) for line in text.splitlines()) <= 100


def test_a_run_that_recorded_no_compiles_says_1_compile() -> None:
    data, _ = summary.summary_for(SMOKE, commit="44379fbf")
    (run,) = data["runs"]
    targets = [t for p in run["presets"].values() for t in p["targets"].values()]
    assert len(targets) == 8  # 4 workloads x prefill, decode
    for t in targets:
        assert t["compiles"] == 1 and t["compiles_median_ms"] == t["ms"] == t["compiles_max_ms"]
        assert target_text(Target.from_json(t)) == (f"beat {t['ms'] * 1000:#.4g} us: 1 compile of {t['mode']} "
                                                    f"({t['runner_up']} {t['runner_up_ms'] * 1000:#.4g} us)")


def test_a_real_run_says_how_many_compiles_each_target_is_the_best_of() -> None:
    data, _ = summary.summary_for(H100, machine="h100-d")
    (run,) = data["runs"]
    table = report.results.load_results(H100, machine="h100-d").table.set_index(["preset", "workload", "mode"])
    targets = [(preset, w, Target.from_json(t)) for preset, p in run["presets"].items()
               for w, t in p["targets"].items()]
    assert {t.compiles for _, _, t in targets} == {1, 3}
    for preset, workload, t in targets:
        row = table.loc[(preset, workload, t.mode)]  # the winner's cell, as the result file recorded it
        assert (t.compiles, t.ms) == (row["compiles"], pytest.approx(row["median_ms"], rel=1e-6))
        assert t.compiles_median_ms == pytest.approx(row["compiles_median_ms"], rel=1e-3)
        assert t.compiles_max_ms == pytest.approx(row["compiles_max_ms"], rel=1e-3)
        words = target_text(t)  # "beat <ms>: <how many> of <mode> (...)"
        if t.mode == "eager":  # compiles nothing: measured once, not "1 process of eager"
            assert ": eager, measured once (" in words
        elif t.compiles == 1:
            assert f": 1 compile of {t.mode} (" in words
        else:
            assert f": the best of 3 compiles of {t.mode} (median " in words
    assert any(t.mode == "eager" for _, _, t in targets)  # prefill llm_topk_sampling_prep, 9.89 ms
