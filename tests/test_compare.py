"""compare: a real H100 run (tests/fixtures/h100-aa2, h100-d) against modified copies of itself (a best mode
changed, regressions, no change), a real A/A pair (its two runs of one commit, h100-c and h100-d), the rendered
comment (golden files), its size limit, the CLI's exits.

Regenerate the golden files with UPDATE_GOLDEN=1 after an intended change of the comment, and review the diff.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import math
import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pandas as pd
import pytest
from comparecli import run_compare

from tracker.analyse import compare
from tracker.analyse.changes import CellChange, Comparison, InstanceChange, KernelChange
from tracker.analyse.compare import (
    FASTER,
    GAINED,
    NOISY,
    NOW_FAILS,
    REMOVED,
    SAME,
    SLOWER,
    UNDECIDED,
    CompareError,
    RunInfo,
    compare_runs,
)
from tracker.errors import ToolError
from tracker.github.comment import changed_in_body
from tracker.publish.comparison import comparison_json
from tracker.publish.markdown import MARKER, MAX_BODY_CHARS
from tracker.publish.prcomment import headline, render_comment
from tracker.store import formats
from tracker.store.asvfiles import CANDIDATE_METRIC_BENCHMARKS, METRIC_BENCHMARKS

ROOT = Path(__file__).resolve().parent.parent
H100 = ROOT / "tests" / "fixtures" / "h100-aa2" / "results"  # two full runs of one commit (its PROVENANCE.md)
MACHINE = "h100-d"  # the run every scenario copies, with kernel candidates and three compiles in some cells
BASE = "759ff183dcd5bdaec5fa61a7f55acb9f10b761ee"  # the commit of both runs
EARLIER_MACHINE = "h100-c"  # the same commit measured the hour before, on a fresh machine
GOLDEN = ROOT / "tests" / "golden"
MANCG = "max-autotune-no-cudagraphs"
LATENCIES = (METRIC_BENCHMARKS["latency"], CANDIDATE_METRIC_BENCHMARKS["latency"])
# each cell's median over its compiles and its slowest compile's: times too, scaled with the latency
SPREADS = {bench["latency"]: [bench["compiles_median"], bench["compiles_max"]]
           for bench in (METRIC_BENCHMARKS, CANDIDATE_METRIC_BENCHMARKS)}


def fake_commit(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()


def result_file(commit: str) -> Path:
    (path,) = (H100 / MACHINE).glob(f"{commit[:8]}-*.json")
    return path


_TEXT: dict[Path, str] = {}


def write_run(dest: Path, commit: str, changes: Mapping[tuple[str, str, str], float | str] | None = None, *,
              scale: float = 1.0, keep: Callable[[str, str, str], bool] | None = None,
              params: Mapping[str, str] | None = None, source: str = BASE, hours: float = 1.0,
              machine: str = MACHINE, compiles: int | None = None) -> Path:
    """A copy of a fixture run as run `commit` in results dir `dest`: every time (result, CI, quartiles, samples,
    the median and slowest of its compiles) of a cell scaled by `scale` and by changes[cell] (a factor, or
    "fail"); cells not `keep`-ed not run. With `compiles`, every cell records that many compiles, all as fast as
    its best (constructed: the fixture run measured three in most autotuned cells and those its confirmation
    re-measured, one elsewhere)."""
    src = result_file(source)
    if src not in _TEXT:
        _TEXT[src] = src.read_text()
    data = json.loads(_TEXT[src])
    cols = {c: i for i, c in enumerate(data["result_columns"])}
    timed = [cols[c] for c in ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75")]
    for name in LATENCIES:
        row = data["results"].get(name)
        if row is None:
            continue
        combos = [tuple(ast.literal_eval(v) for v in combo) for combo in itertools.product(*row[cols["params"]])]
        spreads = [data["results"][b][cols["result"]] for b in SPREADS[name] if b in data["results"]]
        for i, combo in enumerate(combos):
            if len(combo) == 2:  # a kernel under test: (preset, "workload:name")
                workload, kernel = combo[1].split(":")
                combo = (combo[0], workload, f"kernel:{kernel}")
            cell = combo
            change = (changes or {}).get(cell, 1.0)
            if keep is not None and not keep(*cell):
                change = "not run"
            # (column, values) of the latency row, then the compiles' times (no column: a plain time each)
            for c, values in [*((c, row[c]) for c in [*timed, cols["samples"]]), *((None, v) for v in spreads)]:
                if not isinstance(values, list) or values[i] is None:
                    continue
                if change == "fail":
                    values[i] = None
                elif change == "not run":
                    values[i] = None if c == cols["samples"] else math.nan
                elif c == cols["samples"]:
                    values[i] = [x * scale * change for x in values[i]]
                else:
                    values[i] = values[i] * scale * change
    if compiles:
        for latency, prefix in ((METRIC_BENCHMARKS["latency"], "baselines.Baseline"),
                                (CANDIDATE_METRIC_BENCHMARKS["latency"], "candidates.Candidate")):
            row = data["results"].get(latency)
            if row is None:
                continue
            for metric, value in (("compiles", lambda ms: compiles), ("compiles_median", lambda ms: ms),
                                  ("compiles_max", lambda ms: ms)):
                copy = [None] * len(row)
                copy[cols["params"]], copy[cols["version"]] = row[cols["params"]], row[cols["version"]]
                copy[cols["result"]] = [v if v is None or v != v else value(v) for v in row[cols["result"]]]
                data["results"][f"{prefix}.track_{metric}"] = copy
    data["commit_hash"] = commit
    data["date"] = int(data["date"] + hours * 3_600_000)
    data["params"].update({**(params or {}), "machine": machine})
    out = dest / machine / f"{commit[:8]}-{src.name.split('-', 1)[1]}"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data))
    shutil.copy(H100 / MACHINE / "machine.json", out.parent / "machine.json")
    return out


# Scenarios: the head of each is a modified copy of BASE.
SCENARIOS: dict[str, dict[tuple[str, str, str], float | str]] = {
    "best_change": {
        ("prefill", "llm_rmsnorm", "default"): 0.8,  # default (96.4 us) now beats the old winner (mancg, 92.6 us)
        ("prefill", "llm_layernorm", MANCG): 1.4,  # the winner falls behind default
        ("prefill", "llm_rmsnorm", "kernel:triton_rmsnorm"): 0.6,  # the kernel pulls ahead of the new best
    },
    "regression": {
        ("prefill", "llm_topk_sampling_prep", "reduce-overhead"): 1.25,  # not a winner: no best change
        ("prefill", "vlm_patch_embedding_conv2d", "eager"): 1.5,
        ("decode", "llm_logits_projection_softmax", "max-autotune"): "fail",
        ("prefill", "llm_qk_norm", "eager"): 0.8,
        ("decode", "llm_qk_norm", "reduce-overhead"): 3.0,  # its samples spread 111%: too noisy to call
    },
    "no_change": {},
}
SCALES = {"no_change": 1.02}  # 2% slower everywhere: p < 0.01 for most cells, yet below every band


@pytest.fixture(scope="module")
def results_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A results directory per scenario: the fixture's two runs and the scenario's head. The change rule reads a
    machine's other runs as its cells' history; in one directory the scenarios' heads, copies of one run with the
    same compiles, would be each other's history (their copied compiles counted as more replicates, their planted
    changes as the cells' run-to-run spread). Each on its own, a scenario is a machine's first comparison: its cells'
    noise is known from their compiles alone, the fixed bands judging the rest."""
    dirs = {}
    for name, changes in SCENARIOS.items():
        rd = tmp_path_factory.mktemp(f"compare-{name}") / "results"
        shutil.copytree(H100, rd)
        write_run(rd, fake_commit(name), changes, scale=SCALES.get(name, 1.0))
        dirs[name] = rd
    return dirs


@pytest.fixture(scope="module")
def results_dir(results_dirs: dict[str, Path]) -> Path:
    return results_dirs["regression"]


@pytest.fixture(scope="module")
def comparisons(results_dirs: dict[str, Path]) -> dict[str, Comparison]:
    return {name: compare_runs(rd, BASE[:8], fake_commit(name)[:8]) for name, rd in results_dirs.items()}


def cell(c: Comparison, preset: str, workload: str, mode: str) -> CellChange:
    (x,) = [x for x in c.cells if (x.preset, x.workload, x.mode) == (preset, workload, mode)]
    return x


# -- the three scenarios ---------------------------------------------------------------------------------------


def test_a_new_winner_beyond_noise_changes_the_best_baseline(comparisons: dict[str, Comparison]) -> None:
    c = comparisons["best_change"]
    changes = {(i.preset, i.workload): i for i in c.best_changes}
    assert set(changes) == {("prefill", "llm_rmsnorm"), ("prefill", "llm_layernorm")}
    rms, ln = changes[("prefill", "llm_rmsnorm")], changes[("prefill", "llm_layernorm")]
    assert (rms.base_best, rms.head_best) == (MANCG, "default")
    assert rms.reason == "default now wins beyond noise (default faster)"
    assert (ln.base_best, ln.head_best) == (MANCG, "default")
    assert ln.reason == f"default now wins beyond noise ({MANCG} slower)"
    # The best latency itself moved within mancg's 30% band (default's cells have one compile a side: the bands judge
    # the two winners; mancg's three compiles at base leave no half-band "too noisy"): the same. The mode change
    # alone is the news. (default 96.352 us x 0.8 against mancg's 92.576 us, the medians in h100-d's result file)
    assert rms.latency_verdict == SAME and rms.ratio == pytest.approx(0.8 * 0.096352 / 0.092576, rel=1e-3)
    assert rms.threshold == pytest.approx(0.30) and ln.latency_verdict == SAME
    assert cell(c, "prefill", "llm_layernorm", MANCG).verdict == SLOWER
    assert c.changed and c.fails("best-change") and c.fails("regression") and not c.fails("never")


def test_wins_and_geomeans_move_by_the_counted_changes_and_nothing_else(comparisons: dict[str, Comparison]) -> None:
    """Two best baselines went from mancg to default, default's rmsnorm cell got faster and mancg's layernorm
    slower: those rows move, by exactly that; every other mode's wins, ties and geomean read as at base."""
    c = comparisons["best_change"]
    fig = {(f.preset, f.mode): f for f in c.figures}
    default, mancg = fig[("prefill", "default")], fig[("prefill", MANCG)]
    assert (default.head_wins - default.base_wins, mancg.base_wins - mancg.head_wins) == (2, 2)
    assert default.head_geomean > default.base_geomean and mancg.head_geomean < mancg.base_geomean
    moved = {k for k, f in fig.items()
             if (f.base_wins, f.base_tied, f.base_geomean) != (f.head_wins, f.head_tied, f.head_geomean)}
    assert moved == {("prefill", "default"), ("prefill", MANCG)}


def test_a_kernel_that_pulls_ahead_of_a_new_best_gains(comparisons: dict[str, Comparison]) -> None:
    c = comparisons["best_change"]
    assert cell(c, "prefill", "llm_rmsnorm", "kernel:triton_rmsnorm").verdict == FASTER
    (kernel,) = [k for k in c.kernels if (k.preset, k.workload, k.kernel) == ("prefill", "llm_rmsnorm",
                                                                               "triton_rmsnorm")]
    assert kernel.base_speedup == pytest.approx(0.99, abs=0.01) and kernel.head_speedup == pytest.approx(1.37, abs=0.01)
    assert kernel.verdict == GAINED and c.kernel_changes == [kernel]


def test_regressions_without_a_best_change(comparisons: dict[str, Comparison]) -> None:
    c = comparisons["regression"]
    assert c.best_changes == []
    assert {(x.preset, x.workload, x.mode, x.verdict) for x in c.regressions} == {
        ("prefill", "llm_topk_sampling_prep", "reduce-overhead", SLOWER),
        ("prefill", "vlm_patch_embedding_conv2d", "eager", SLOWER),
        ("decode", "llm_logits_projection_softmax", "max-autotune", NOW_FAILS),
    }
    assert [(x.workload, x.verdict) for x in c.improvements] == [("llm_qk_norm", FASTER)]
    noisy = cell(c, "decode", "llm_qk_norm", "reduce-overhead")
    assert noisy.verdict == NOISY and noisy.ratio == pytest.approx(3.0) and noisy.spread > 0.2
    assert c.fails("regression") and not c.fails("best-change")


def test_a_small_uniform_shift_is_significant_but_no_change(comparisons: dict[str, Comparison]) -> None:
    c = comparisons["no_change"]
    ok = [x for x in c.cells if x.ratio is not None]
    assert all(x.ratio == pytest.approx(1.02) for x in ok)
    # Both conditions are needed: the samples alone call most of these cells different.
    assert sum(x.p_value < 0.01 for x in ok) > len(ok) / 2
    # the same, or undecided where the cell's interval reaches beyond what the rule could call the same: never a change
    assert {x.verdict for x in ok} <= {SAME, UNDECIDED} and SAME in {x.verdict for x in ok}
    assert not c.changed and not c.fails("best-change") and not c.fails("regression")
    # what the budget could not decide is said, the instances' best latencies first: never read as unchanged
    cells, best = len(c.undecided), len(c.undecided_best)
    assert cells and best and {(i.preset, i.workload) for i in c.undecided_best} <= \
        {(x.preset, x.workload) for x in c.undecided}
    assert render_comment(c).splitlines()[2] == \
        f"### compile-baselines: No change found · {best} best latencies undecided · {cells} cells undecided"


def test_a_real_rerun_of_the_same_code_changes_no_best_baseline_and_regresses_nothing() -> None:
    """The fixture's A/A pair: one commit measured on two fresh machines an hour apart (h100-aa2/PROVENANCE.md).
    No best baseline changed and no cell changed; one instance has another winner, backed by no judged change.
    The false alarm the provenance names is gone: a host-bound 5 us cell that h100-c compiled once (7.17 us) and
    h100-d three times (best 4.99 us) moved -26% against its noise (the host-bound run-to-run floor of 3%), too little
    among 213 cells to be selected, and its interval too wide to call it the same: undecided, not counted. So is
    decode vlm_vit_mlp_block's autotuned cell, whose three compiles a side do not overlap (h100-d's mean 10% beyond
    h100-c's, p ~ 0.001, not selected among 213 cells): the comparison could resolve no change under 11% there, so a
    10% move is neither the same nor a change."""
    c = compare_runs(H100, BASE, BASE, EARLIER_MACHINE, head_machine=MACHINE)
    assert (c.best_changes, c.regressions, c.improvements, c.noisy) == ([], [], [], [])
    rms = cell(c, "decode", "llm_rmsnorm", MANCG)
    assert rms.verdict == UNDECIDED and rms.compiles == (1, 3)  # never a change, never "the same"
    assert (round(rms.base_ms * 1000, 2), round(rms.head_ms * 1000, 2)) == (7.17, 4.99)
    vit = cell(c, "decode", "vlm_vit_mlp_block", MANCG)
    assert (vit.verdict, vit.compiles, vit.noise) == (
        UNDECIDED, (3, 3), "6 compiles of this comparison; the autotuned GPU-bound prior")
    assert vit.resolution > 0.10 and vit.ci[0] > 1 and vit.p_value > 0.05 / len(c.cells)
    assert vit.noisy_reason is None  # undecided, not too noisy: its samples spread little
    (other,) = [i for i in c.instances if i.mode_changed]
    assert other.workload == vit.workload and not other.best_changed
    assert other.reason == "default now wins, but the change is undecided"
    assert {k.verdict for k in c.kernels} <= {SAME, UNDECIDED}  # both runs measured the same kernels
    # a kernel whose own cell is undecided has its speedup's change undecided too, never the same
    open_ = {(x.preset, x.workload, x.mode) for x in c.cells if x.verdict == UNDECIDED}
    said = {k.verdict for k in c.kernels if (k.preset, k.workload, f"kernel:{k.kernel}") in open_}
    assert said == {UNDECIDED}
    assert headline(c) == f"No change found · {len(c.undecided_best)} best latencies undecided · " \
        f"{len(c.undecided)} cells undecided"


# -- the rendered comment --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_rendered_comment_matches_the_golden_file(comparisons: dict[str, Comparison], name: str) -> None:
    text = render_comment(comparisons[name])
    path = GOLDEN / f"comment_{name}.md"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"rendered comment differs from {path}; UPDATE_GOLDEN=1 to accept"
    assert text.startswith(f"{MARKER}\n<!-- compile-baselines:changed=")
    assert changed_in_body(text) == comparisons[name].changed
    assert len(text) <= MAX_BODY_CHARS


def huge_comparison(n: int) -> Comparison:
    info = RunInfo("a" * 40, MACHINE, "2026-11-22T00:00:00+00:00", "NVIDIA H100 80GB HBM3", "2.11.0", "3.6.0")
    head = RunInfo("b" * 40, MACHINE, "2026-11-23T00:00:00+00:00", "NVIDIA H100 80GB HBM3", "2.11.0", "3.6.0")
    verdicts = [SLOWER, FASTER, SAME, NOISY, NOW_FAILS]
    cells = [CellChange("prefill", f"workload_{i:05d}", "max-autotune", 0.1, 0.2, 2.0, 1e-9, 0.3, 0.05,
                        verdicts[i % 5]) for i in range(n)]
    instances = [InstanceChange("prefill", f"workload_{i:05d}", "default", MANCG, ("default",), (MANCG,), 0.1, 0.05,
                                0.5, 1e-9, 0.3, FASTER, True, True, f"{MANCG} now wins beyond noise ({MANCG} faster)",
                                False) for i in range(n // 4)]
    kernels = [KernelChange("prefill", f"workload_{i:05d}", "my_kernel", 1.0, 2.0, 2.0, GAINED) for i in range(n // 4)]
    return Comparison(info, head, compare.ChangeRule(), cells, instances, kernels, [], [], [])


def test_a_huge_comparison_fits_githubs_limit_cutting_rows_never_the_headline() -> None:
    c = huge_comparison(4_000)
    text = render_comment(c)
    assert len(text) <= MAX_BODY_CHARS
    headline = ("### compile-baselines: Best baselines changed: 1000 · significant regressions: 1600 · "
                "improvements: 800 · kernel speedups changed: 1000 · 800 cells too noisy to judge")
    assert text.splitlines()[:3] == [MARKER, "<!-- compile-baselines:changed=true -->", headline]
    assert "more not shown (GitHub's comment size limit)" in text
    assert text.rstrip().endswith("</sub>")  # the fixed parts after the tables survive


def test_a_large_comparison_loses_detail_rows_first() -> None:
    c = huge_comparison(400)  # the sections fit; the 400 detail rows do not
    text = render_comment(c)
    assert len(text) <= MAX_BODY_CHARS < len(render_comment(c, max_chars=10**9))
    details = text.split("<details>")[1]
    assert "more not shown" in details and "more not shown" not in text.split("<details>")[0]
    assert text.count("| workload_") - details.count("| workload_") == 100 + 240 + 100  # best, significant, kernels


# -- refusals, added and removed -------------------------------------------------------------------------------


def test_other_torch_or_gpu_is_refused_unless_asked(tmp_path: Path) -> None:
    write_run(tmp_path, fake_commit("torch"), params={"torch": "2.12.0.dev20261122+cu130"})
    write_run(tmp_path, fake_commit("gpu"), params={"gpu": "NVIDIA H200"}, hours=2)
    shutil.copy(result_file(BASE), tmp_path / MACHINE)
    for head, what in (("torch", "torch 2.11.0+cu130 vs 2.12.0.dev20261122+cu130"),
                       ("gpu", "gpu NVIDIA H100 80GB HBM3 vs NVIDIA H200")):
        with pytest.raises(CompareError, match="--allow-cross-versions") as e:
            compare_runs(tmp_path, BASE, fake_commit(head))
        assert what in str(e.value)
    c = compare_runs(tmp_path, BASE, fake_commit("torch"), allow_cross_versions=True)
    assert c.notes == ["torch differs: 2.11.0+cu130 (base) vs 2.12.0.dev20261122+cu130 (head)"]
    assert "**Versions differ**" in render_comment(c)
    # One machine per PyTorch version: the versions at one commit, across machine names.
    write_run(tmp_path, BASE, params={"torch": "2.12.0.dev20261122+cu130"}, machine="h100-torch-nightly", hours=0)
    with pytest.raises(CompareError, match="--allow-cross-versions"):
        compare_runs(tmp_path, BASE, BASE, MACHINE, head_machine="h100-torch-nightly")
    c = compare_runs(tmp_path, BASE, BASE, MACHINE, True, head_machine="h100-torch-nightly")
    assert (c.base.machine, c.head.machine, c.changed) == (MACHINE, "h100-torch-nightly", False)
    assert f"`759ff183` on {MACHINE} → `759ff183` on **h100-torch-nightly**" in render_comment(c)


def test_added_and_removed_instances_and_cells_are_listed_not_errors(tmp_path: Path) -> None:
    def keep(preset: str, workload: str, mode: str) -> bool:
        return (preset, workload) != ("decode", "rl_ppo_clipped_loss") and mode != "kernel:torch_lerp"

    write_run(tmp_path, fake_commit("smaller"), keep=keep)
    shutil.copy(result_file(BASE), tmp_path / MACHINE)
    c = compare_runs(tmp_path, BASE, fake_commit("smaller"))
    assert (c.removed, c.added) == ([("decode", "rl_ppo_clipped_loss")], [])
    assert {(k.preset, k.kernel) for k in c.kernels if k.verdict == REMOVED} == {
        ("prefill", "torch_lerp"), ("decode", "torch_lerp")}
    assert not c.changed
    back = compare_runs(tmp_path, fake_commit("smaller"), BASE)
    assert (back.added, back.removed) == ([("decode", "rl_ppo_clipped_loss")], [])
    assert "Instances only in head: rl_ppo_clipped_loss decode." in render_comment(back)


def test_clear_errors_for_unknown_or_identical_runs(results_dir: Path) -> None:
    with pytest.raises(ToolError, match="no results for commit 'deadbeef'"):
        compare_runs(results_dir, "deadbeef", BASE)
    with pytest.raises(CompareError, match="same run"):
        compare_runs(results_dir, BASE, BASE[:10], MACHINE)
    with pytest.raises(CompareError, match="several machines measured both"):  # h100-c and h100-d
        compare_runs(results_dir, BASE, BASE[:10])


# -- tables without samples, the CLI ---------------------------------------------------------------------------


def table(rows: Iterable[tuple[str, str, float, float, float]]) -> pd.DataFrame:
    """A results table of two runs (commit "b..."/"h...") from (commit, mode, median, ci_low, ci_high)."""
    recs = [{"commit": c, "date": pd.Timestamp("2026-11-22", tz="UTC"), "machine": "m", "gpu": "g", "torch": "t",
             "triton": "x", "preset": "prefill", "workload": "llm_rmsnorm", "mode": mode, "domain": "llm",
             "status": "ok", "reason": "", "median_ms": med, "ci_low": lo, "ci_high": hi, "q25": med * 0.99,
             "q75": med * 1.01, "n_samples": 100, "samples": None, "compile_s": 1.0, "peak_mem_mib": 1.0,
             "launch_us": 5.0} for c, mode, med, lo, hi in rows]
    return pd.DataFrame(recs)


def test_without_samples_disjoint_cis_stand_for_significance() -> None:
    t = table([("b" * 40, "eager", 1.0, 0.99, 1.01), ("b" * 40, "default", 0.8, 0.79, 0.81),
               ("h" * 40, "eager", 1.3, 1.29, 1.31), ("h" * 40, "default", 0.8, 0.6, 1.0)])
    c = compare_runs(t, "bbbb", "hhhh")
    assert [(x.mode, x.verdict, x.p_value) for x in c.cells] == [("eager", SLOWER, 0.0), ("default", SAME, 1.0)]
    assert c.best_changes == []


def test_compare_main_writes_the_format_and_exits_3_when_fail_on_holds(
        results_dirs: dict[str, Path], comparisons: dict[str, Comparison], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    best, reg = fake_commit("best_change")[:8], fake_commit("regression")[:8]
    results_dir = results_dirs["regression"]
    out = tmp_path / "cmp.md"
    assert run_compare(results_dirs["best_change"], BASE[:8], best, MACHINE, "md", "best-change",
                        out) == compare.EXIT_FAIL_ON == 3
    assert out.read_text().startswith(MARKER) and "Best baselines changed: 2" in capsys.readouterr().err
    assert run_compare(results_dir, BASE[:8], reg, None, "md", "best-change", out) == 0
    assert run_compare(results_dir, BASE[:8], reg, None, "json", "regression", None) == 3
    data = json.loads(capsys.readouterr().out)
    assert list(data) == ["format", "base", "head", "summary", "rule", "instances", "cells", "kernels", "figures",
                          "added", "removed", "notes", "warnings", "scope", "stopped"]
    assert data["format"] == formats.COMPARISON.current
    assert data["summary"] == {"changed": True, "best_changed": 0, "regressions": 3, "improvements": 1,
                               "noisy": data["summary"]["noisy"], "kernel_changes": 0, "cells": 213,
                               "instances": 41, "unjudged": 0, "method": 0, "unconfirmed": 0,
                               "undecided": data["summary"]["undecided"], "undecided_best": 11}
    # prefill llm_rmsnorm eager: 498.688 us in h100-d's result file, one compile (eager compiles nothing): its noise
    # unknown, the fixed bands judge it
    assert data["cells"][0] == {"preset": "prefill", "workload": "llm_rmsnorm", "mode": "eager", "base_ms": 0.498688,
                                "head_ms": 0.498688, "ratio": 1.0, "p_value": 1.0, "threshold": 0.1,
                                "spread": data["cells"][0]["spread"], "verdict": "same", "compiled": None,
                                "compiles": [1, 1], "method": False, "ci": None, "resolution": None,
                                "means_ms": None, "noise": "fixed bands", "more": None, "noisy_reason": None,
                                "reason": None}
    # A cell of three compiles a side is judged against its noise: its evidence in the JSON
    tested = data["cells"][data["cells"].index(next(x for x in data["cells"] if x["ci"] is not None))]
    # (the comparison's own cells of three compiles a side are the prior of their class: no history measured it)
    assert tested["compiles"] == [3, 3]
    assert tested["noise"] == "6 compiles of this comparison; the autotuned GPU-bound prior"
    assert tested["ci"][0] < tested["ratio"] == 1.0 < tested["ci"][1] and tested["means_ms"][0] == tested["means_ms"][1]
    assert 0 < tested["threshold"] < tested["resolution"]
    assert data == comparison_json(comparisons["regression"])  # stable: same input, same JSON
    with pytest.raises(ValueError, match="fail_on is one of"):
        run_compare(results_dir, BASE, reg, fail_on="sometimes")
    with pytest.raises(ValueError, match="fmt is one of"):
        run_compare(results_dir, BASE, reg, fmt="html")
