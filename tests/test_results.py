"""tracker.store.results: asv result files -> one tidy table; bad files skipped with one warning each, never
modified."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tracker.errors import ToolError
from tracker.measure.cellresult import CellResult
from tracker.store import asvjson, results
from workloads.names import MODES, PRESET_NAMES, WORKLOAD_NAMES

CPU_TINY = Path(__file__).resolve().parent / "fixtures" / "cpu-tiny" / "results"
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25",
           "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]
PARAMS = [[repr(p) for p in PRESET_NAMES], [repr(w) for w in WORKLOAD_NAMES], [repr(m) for m in MODES]]

Cell = tuple[str, str, str]


def write_result_file(results_dir: Path, cells: Mapping[Cell, Any], *, machine: str = "h100", commit: str = "a" * 40,
                      date_ms: int = 1_767_225_600_000, torch: str = "2.9.1", gpu: str = "NVIDIA H100 80GB HBM3",
                      launch_us: float | None = 6.0, env: str = "existing-py_usr_bin_python3", version: int = 2,
                      params: list[list[str]] | None = None, extra: Mapping[str, list[Any]] | None = None) -> Path:
    """A hand-made asv result file, laid out as asv 0.6 writes it (compact JSON, NaN allowed).

    `cells` maps (preset, workload, mode) to a median (ms), None (failed), NaN (skipped), or a dict with
    median/ci/samples. Unlisted combinations are NaN, as asv stores 'not run'."""
    params = params or PARAMS
    combos = list(itertools.product(*params))
    index = {c: i for i, c in enumerate(combos)}
    n = len(combos)
    res: list[Any] = [math.nan] * n
    ci_a: list[Any] = [None] * n
    ci_b: list[Any] = [None] * n
    q25: list[Any] = [None] * n
    q75: list[Any] = [None] * n
    repeat: list[Any] = [None] * n
    samples: list[Any] = [None] * n
    compile_s: list[Any] = [math.nan] * n
    for (p, w, m), value in cells.items():
        i = index[(repr(p), repr(w), repr(m))]
        if isinstance(value, dict):
            res[i] = value["median"]
            ci_a[i], ci_b[i] = value.get("ci", (value["median"] * 0.99, value["median"] * 1.01))
            q25[i], q75[i] = value["median"] * 0.98, value["median"] * 1.02
            samples[i] = value.get("samples")
            repeat[i] = len(samples[i]) if samples[i] else 100
            compile_s[i] = 12.5
        else:
            res[i] = value
            compile_s[i] = value if value is None or math.isnan(value) else 12.5
    row = [res, params, "1", date_ms, 10.0, ci_a, ci_b, q25, q75, [1 if r else None for r in repeat], repeat,
           samples]
    data = {
        "commit_hash": commit, "env_name": env, "date": date_ms,
        "params": {"machine": machine, "os": "Linux", "arch": "x86_64", "cpu": "cpu", "num_cpu": "16", "ram": "1",
                   "gpu": gpu, "driver": "580.1", "cuda": "13.0", "torch": torch, "triton": "3.5.1",
                   "python": "/usr/bin/python3"},
        "python": "/usr/bin/python3", "requirements": {}, "env_vars": {}, "result_columns": COLUMNS,
        "results": {
            "baselines.Baseline.track_latency": row,
            "baselines.Baseline.track_compile_time": [compile_s, params, "1", date_ms, 10.0],
            "baselines.Baseline.track_peak_memory": [[math.nan] * n, params, "1", date_ms, 10.0],
        },
        "durations": {}, "version": version,
    }
    if launch_us is not None:
        data["results"]["baselines.Host.track_launch_overhead"] = [[launch_us], [], "1", date_ms, 1.0]
    data["results"].update(extra or {})
    path = results_dir / machine / f"{commit[:8]}-{env}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    path.write_text(json.dumps(data))
    return path


def instance(preset: str, workload: str, medians: Mapping[str, Any]) -> dict[Cell, Any]:
    return {(preset, workload, m): v for m, v in medians.items()}


# ---------------------------------------------------------------------------------------------------- real files


def test_real_cpu_run_loads_into_one_row_per_cell() -> None:
    loaded = results.load_results(CPU_TINY)
    t = loaded.table
    assert loaded.warnings == []
    assert list(t.columns) == ["commit", "date", "machine", "gpu", "torch", "triton", "preset", "workload", "mode",
                               "domain", "status", "reason", "median_ms", "ci_low", "ci_high", "q25", "q75",
                               "n_samples", "samples", "compile_s", "peak_mem_mib", "compiles", "compiles_median_ms",
                               "compiles_max_ms", "compiles_mean_ms", "compiles_log_sd", "compiles_set_aside",
                               "launch_us"]
    # 2 runs x 2 workloads x all 5 modes (the 3 modes not run are 'skipped'), one row each
    assert len(t) == 20
    assert set(t["commit"].astype(str).str[:8]) == {"5d800df4", "bc844535"}
    ok = t[t["status"] == "ok"]
    assert len(ok) == 8 and set(ok["mode"].astype(str)) == {"eager", "default"}
    row = ok[(ok["commit"].astype(str).str.startswith("bc84")) & (ok["workload"] == "llm_rmsnorm")
             & (ok["mode"] == "eager")].iloc[0]
    assert row["median_ms"] == pytest.approx(0.016234, rel=1e-3)
    assert row["ci_low"] <= row["median_ms"] <= row["ci_high"]
    assert row["n_samples"] == 1000 and row["samples"] is None
    assert row["launch_us"] == pytest.approx(4.206, rel=1e-3)
    assert (row["machine"], row["gpu"], row["torch"], row["triton"], row["preset"], row["domain"]) == (
        "cpu-laptop", "cpu", "2.13.0+cpu", "none", "tiny", "llm")
    assert math.isnan(row["peak_mem_mib"])  # n/a on CPU
    skipped = t[t["status"] == "skipped"]
    assert (skipped["reason"] == results.NOT_RUN).all() and skipped["median_ms"].isna().all()


def test_fast_reader_agrees_with_the_json_parser_except_for_samples() -> None:
    for path in sorted(CPU_TINY.glob("*/*-*.json")):
        text = path.read_text()
        full = json.loads(text)
        fast = asvjson.parse_result_text(text)
        samples = full["result_columns"].index("samples")
        for name, row in full["results"].items():
            expected = [None if i == samples else v for i, v in enumerate(row)]
            assert json.dumps(fast["results"][name]) == json.dumps(expected)
        assert {k: v for k, v in fast.items() if k != "results"} == {k: v for k, v in full.items() if k != "results"}
        assert json.dumps(asvjson.parse_result_text(text, with_samples=True)) == json.dumps(full)


def test_samples_only_on_request_and_for_one_run() -> None:
    assert results.load_results(CPU_TINY).table["samples"].isna().all()
    one = results.load_samples(CPU_TINY, machine="cpu-laptop", commit="bc84")
    ok = one[one["status"] == "ok"]
    assert len(ok) == 4
    for _, r in ok.iterrows():
        assert len(r["samples"]) == r["n_samples"]
        assert min(r["samples"]) <= r["median_ms"] <= max(r["samples"])


def test_result_files_are_never_modified(tmp_path: Path) -> None:
    shutil.copytree(CPU_TINY, tmp_path / "r")
    write_result_file(tmp_path / "r", instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": None}))
    (tmp_path / "r" / "cpu-laptop" / "broken-x.json").write_text('{"commit_hash": "abc", "results": {')

    def digest() -> dict[str, str]:
        return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((tmp_path / "r").rglob("*"))
                if p.is_file()}

    before = digest()
    results.load_results(tmp_path / "r", with_samples=True)
    results.load_results(tmp_path / "r")
    assert digest() == before


# ---------------------------------------------------------------------------------------------------- statuses


def test_failed_cell_takes_its_reason_from_the_cell_store(tmp_path: Path) -> None:
    from tracker.store.cells import CellStore, RunKey

    rd = tmp_path / "results"
    write_result_file(rd, instance("decode", "llm_rmsnorm", {"eager": 0.03, "default": None, "max-autotune": None}))
    store = CellStore(tmp_path / "cells", RunKey("h100", "a" * 40, "2.9.1"))
    store.put(CellResult.from_json(
        {"preset": "decode", "workload": "llm_rmsnorm", "mode": "default", "status": "failed",
               "reason": "InductorError: out of resource: shared memory"}))
    t = results.load_results(rd).table  # the cell store beside the results dir is the default
    by_mode = t.set_index(t["mode"].astype(str))
    assert by_mode.loc["default", "status"] == "failed"
    assert by_mode.loc["default", "reason"] == "InductorError: out of resource: shared memory"
    assert by_mode.loc["max-autotune", "reason"] == results.NO_REASON
    assert by_mode.loc["eager", "status"] == "ok" and by_mode.loc["eager", "reason"] == ""
    assert by_mode.loc["reduce-overhead", "status"] == "skipped"


def test_instances_not_run_at_all_have_no_rows(tmp_path: Path) -> None:
    write_result_file(tmp_path, instance("prefill", "diff_cfg_blend", {"eager": 0.02}))
    t = results.load_results(tmp_path).table
    assert set(t["workload"].astype(str)) == {"diff_cfg_blend"} and len(t) == 5


def test_grid_points_that_cannot_exist_are_never_cells_nor_compared(tmp_path: Path) -> None:
    """asv fills the points a grown grid adds to an existing file with null, its mark of a failure: points that
    cannot exist (decode of a decode-invariant workload, a preset a workload does not have) never become cells, so
    compare never lists them as added, removed or now failing; a point that exists keeps its failure."""
    from tracker.analyse.compare import compare_runs

    measured = instance("decode", "llm_rmsnorm", {"eager": 0.02, "default": 0.01})
    write_result_file(tmp_path, measured, commit="a" * 40)
    null_filled = {**measured, ("decode", "llm_rmsnorm", "max-autotune"): None,
                   **instance("decode", "rl_dpo_loss", dict.fromkeys(MODES)),  # decode-invariant: no such cell
                   **instance("decode", "rl_grpo_loss", {"eager": 0.5})}  # even with a number
    write_result_file(tmp_path, null_filled, commit="b" * 40, date_ms=1_767_225_700_000)
    t = results.load_results(tmp_path).table
    head = t[t["commit"] == "b" * 40]
    assert set(zip(head["workload"].astype(str), head["status"].astype(str), strict=True)) == {
        ("llm_rmsnorm", "ok"), ("llm_rmsnorm", "skipped"), ("llm_rmsnorm", "failed"), ("rl_grpo_loss", "ok")}
    c = compare_runs(tmp_path, "aaaa", "bbbb")
    assert ("decode", "rl_dpo_loss") not in c.added and c.removed == []
    assert {x.workload for x in c.cells} == {"llm_rmsnorm", "rl_grpo_loss"}  # a measurement is kept, wherever it is


def test_domains_from_workload_names() -> None:
    from workloads import catalog  # what the reader asks for a row's domain

    assert catalog.domain("llm_kl_divergence_loss") == "llm"  # the LLM losses are domain llm
    assert catalog.domain("vlm_contrastive_nce_loss") == "vlm"
    assert catalog.domain("diff_cfg_blend") == "diffusion"
    assert catalog.domain("rl_grpo_loss") == "rl"
    with pytest.raises(KeyError):
        catalog.domain("mlp")


# ---------------------------------------------------------------------------------------------------- metrics


def test_a_metric_added_to_the_registry_reaches_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Adding a metric is one entry in tracker.metrics: the asv classes get its track_ method with its unit, the
    writer records it through asv's Results, and the reader gives it a column."""
    import sys
    from types import SimpleNamespace

    from asv.benchmarks import Benchmarks

    from benchmarks.baselines import with_metric_tracks
    from tracker import metrics
    from tracker.store import asvfiles

    monkeypatch.setitem(metrics.METRICS, "wall_time",
                        metrics.Metric("wall_time", "s", "wall_s", lambda cell: cell.wall_s))

    @with_metric_tracks
    class Suite:
        cell = CellResult("tiny", "llm_rmsnorm", "eager", "cpu", "ok", wall_s=4.5)

    assert Suite.track_wall_time.unit == "s" and Suite().track_wall_time("tiny") == 4.5

    results_dir = tmp_path / "results"
    conf = asvfiles.load_conf(Path(__file__).resolve().parent.parent / "asv.conf.json", str(results_dir))
    benchmarks = Benchmarks(conf, [
        {"name": name, "type": "track", "unit": metrics.METRICS[m].unit, "version": "1", "timeout": 60, "code": "",
         "param_names": ["preset", "workload", "mode"], "params": PARAMS}
        for m, name in metrics.benchmark_names(asvfiles.BENCHMARK_CLASS).items()])
    cells = [{"preset": "prefill", "workload": "llm_rmsnorm", "mode": mode, "status": "ok", "reason": "",
              "samples_ms": [0.5, 0.6, 0.7], "compile_s": 3.0, "peak_mem_bytes": 2**20, "wall_s": 10.0 + i}
             for i, mode in enumerate(MODES)]
    entry = {"machine": "h100", "os": "Linux", "arch": "x86_64", "cpu": "cpu", "num_cpu": "16", "ram": "1",
             "gpu": "NVIDIA H100 80GB HBM3", "driver": "580.1", "cuda": "13.0", "torch": "2.9.1", "triton": "3.5.1"}
    env = SimpleNamespace(name="existing-py", python=sys.executable, env_vars={})
    run = asvfiles.open_results(conf, env, entry, "a" * 40, 1_767_225_600_000)
    asvfiles.record_cells(run, benchmarks, [CellResult.from_json(r) for r in cells])
    written = asvfiles.save_results(conf, run, entry)
    assert "baselines.Baseline.track_wall_time" in json.loads(written.read_text())["results"]

    t = results.load_results(results_dir).table
    assert list(t.columns) == results.table_columns() and "wall_s" in t.columns
    assert t.set_index(t["mode"].astype(str))["wall_s"].to_dict() == {m: 10.0 + i for i, m in enumerate(MODES)}
    assert (t["median_ms"] == 0.6).all() and (t["peak_mem_mib"] == 1.0).all() and (t["status"] == "ok").all()


# ---------------------------------------------------------------------------------------------------- bad files


@pytest.fixture
def mixed_dir(tmp_path: Path) -> Path:
    """One good file and one of each kind of bad file."""
    good = write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": 0.12}))
    text = good.read_text()
    (good.parent / "bbbbbbbb-truncated.json").write_text(text[: len(text) // 2])
    (good.parent / "cccccccc-corrupt.json").write_text("not json at all {")
    newer = json.loads(text)
    newer["version"] = 3
    (good.parent / "dddddddd-newer.json").write_text(json.dumps(newer))
    return tmp_path


def test_truncated_corrupt_and_unknown_version_files_are_skipped_with_one_warning_each(mixed_dir: Path) -> None:
    loaded = results.load_results(mixed_dir)
    assert len(loaded.table) == 5 and set(loaded.table["commit"].astype(str)) == {"a" * 40}
    assert len(loaded.warnings) == 3
    joined = "\n".join(loaded.warnings)
    assert "bbbbbbbb-truncated.json" in joined and "cccccccc-corrupt.json" in joined
    assert "format version 3" in joined and "reads version 2" in joined


def test_strict_mode_makes_a_bad_file_an_error(mixed_dir: Path) -> None:
    with pytest.raises(results.ResultsError) as e:
        results.load_results(mixed_dir, strict=True)
    assert isinstance(e.value, ToolError)


def test_a_benchmark_no_longer_in_the_suite_gets_one_warning(tmp_path: Path) -> None:
    old = {"baselines.Baseline.track_old_metric": [[1.0], [], "1", 0, 1.0]}
    cells = instance("prefill", "llm_rmsnorm", {"eager": 0.5})
    write_result_file(tmp_path, cells, commit="1" * 40, extra=old)
    write_result_file(tmp_path, cells, commit="2" * 40, extra=old)
    loaded = results.load_results(tmp_path)
    assert len(loaded.table) == 10
    assert len(loaded.warnings) == 1
    assert "baselines.Baseline.track_old_metric" in loaded.warnings[0] and "2 result file" in loaded.warnings[0]
    with pytest.raises(results.ResultsError, match="track_old_metric"):
        results.load_results(tmp_path, strict=True)


def test_a_removed_workload_is_ignored_with_one_warning(tmp_path: Path) -> None:
    params = [PARAMS[0], [*PARAMS[1], "'llm_flash_attention'"], PARAMS[2]]
    write_result_file(tmp_path, {("prefill", "llm_flash_attention", "eager"): 1.0,
                                 ("prefill", "llm_rmsnorm", "eager"): 0.5}, params=params)
    loaded = results.load_results(tmp_path)
    assert set(loaded.table["workload"].astype(str)) == {"llm_rmsnorm"}
    assert len(loaded.warnings) == 1 and "llm_flash_attention" in loaded.warnings[0]


def test_other_current_suites_are_not_warned_about(tmp_path: Path) -> None:
    cand = {"candidates.Candidate.track_latency": [[0.1], [["'prefill'"], ["'llm_rmsnorm:triton'"]], "1", 0, 1.0]}
    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5}), extra=cand)
    assert results.load_results(tmp_path).warnings == []


def test_one_run_in_two_environment_files_keeps_the_last_with_a_warning(tmp_path: Path) -> None:
    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5}), env="existing-a")
    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.4}), env="existing-b")
    loaded = results.load_results(tmp_path)
    assert len(loaded.table) == 5
    assert len(loaded.warnings) == 1 and "more than one result file" in loaded.warnings[0]


# ---------------------------------------------------------------------------------------------------- selection


def test_empty_or_missing_results_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(results.ResultsError, match="does not exist"):
        results.load_results(tmp_path / "nope")
    with pytest.raises(results.ResultsError, match="no asv result files"):
        results.load_results(tmp_path)


def test_runs_are_selected_by_machine_and_commit_prefix() -> None:
    t = results.load_results(CPU_TINY, machine="cpu-laptop", commit="5d80").table
    assert set(t["commit"].astype(str)) == {"5d800df4bad6f855dd4208d2a080d087f3fe364e"}
    with pytest.raises(results.ResultsError, match=r"no results for machine 'gpu-box'.*cpu-laptop"):
        results.load_results(CPU_TINY, machine="gpu-box")
    with pytest.raises(results.ResultsError, match="no results for commit 'ffff'"):
        results.load_results(CPU_TINY, commit="ffff")


def test_runs_are_listed_oldest_first_from_their_headers() -> None:
    runs, warnings = results.list_runs(CPU_TINY)
    assert warnings == []
    assert [r.commit[:8] for r in runs] == ["5d800df4", "bc844535"]
    assert runs[0].torch == "2.13.0+cpu" and runs[0].machine == "cpu-laptop" and runs[0].params["gpu"] == "cpu"


def test_fast_reader_handles_other_layouts_asv_could_write(tmp_path: Path) -> None:
    cells = {("prefill", "llm_rmsnorm", "eager"): {"median": 0.5, "samples": [0.49, 0.5, 0.51]},
             ("prefill", "llm_rmsnorm", "default"): None}
    path = write_result_file(tmp_path, cells, extra={"baselines.Host.track_launch_overhead": [[6.0], [], "1"]})
    data = json.loads(path.read_text())
    data["env_vars"] = {"NOTE": 'a "quoted" ] } value'}  # strings with brackets and escaped quotes
    row = data["results"]["baselines.Baseline.track_latency"]
    row.append("eJzLSM3JyQcABiwCFQ==")  # a profile after the samples
    for name, text in {"pretty": json.dumps(data, indent=4, sort_keys=True), "compact": json.dumps(data)}.items():
        fast = asvjson.parse_result_text(text)
        assert fast["results"]["baselines.Baseline.track_latency"][-1] == "eJzLSM3JyQcABiwCFQ==", name
        assert fast["results"]["baselines.Baseline.track_latency"][-2] is None, name
        assert fast["env_vars"] == data["env_vars"], name
        assert json.dumps(asvjson.parse_result_text(text, with_samples=True)) == json.dumps(json.loads(text)), name


def test_an_empty_file_is_skipped_with_a_warning(tmp_path: Path) -> None:
    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5}))
    (tmp_path / "h100" / "eeeeeeee-empty.json").write_text("")
    loaded = results.load_results(tmp_path)
    assert len(loaded.table) == 5
    assert len(loaded.warnings) == 1 and "eeeeeeee-empty.json" in loaded.warnings[0]


H100 = Path(__file__).resolve().parent / "fixtures" / "h100-aa2" / "results"  # two full runs, one commit


@pytest.mark.skipif(not H100.is_dir(), reason="the H100 fixture is not in this checkout")
def test_the_real_h100_runs_load_completely() -> None:
    loaded = results.load_results(H100)
    assert loaded.warnings == []
    assert loaded.table["commit"].astype(str).unique().tolist() == ["759ff183dcd5bdaec5fa61a7f55acb9f10b761ee"]
    t = loaded.table[loaded.table["mode"].astype(str).isin(MODES)]  # the 5 modes; candidates are checked elsewhere
    runs = dict(list(t.groupby("machine", observed=True)))
    assert sorted(runs) == ["h100-c", "h100-d"] and all(len(run) == 205 for run in runs.values())
    assert (t["status"] == "ok").all()
    assert t.groupby("preset", observed=True)["workload"].nunique().to_dict() == {"prefill": 23, "decode": 18}
    assert t["gpu"].astype(str).unique().tolist() == ["NVIDIA H100 80GB HBM3"]
    assert (t["n_samples"] > 0).all() and (t["ci_low"] <= t["median_ms"]).all()
    assert (t["median_ms"] <= t["ci_high"]).all() and t["launch_us"].notna().all()
    assert t["peak_mem_mib"].notna().all() and t["compile_s"].notna().all()  # measured on CUDA
    # the runs recorded their compiles: three in most autotuned cells and in those a confirmation re-measured
    assert set(t["compiles"]) == {1, 3} and (t["compiles_median_ms"] <= t["compiles_max_ms"]).all()
    assert (t["median_ms"] <= t["compiles_median_ms"] * (1 + 1e-9)).all()  # the latency is the best compile's


# ---------------------------------------------------------------------------------------------------- hostile files


@pytest.mark.parametrize("value", [-1.5, 0.0, math.inf])
def test_an_impossible_latency_is_a_failed_cell_with_one_warning(tmp_path: Path, value: float) -> None:
    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": value}))
    loaded = results.load_results(tmp_path)
    row = loaded.table[loaded.table["mode"] == "default"].iloc[0]
    assert row["status"] == "failed" and math.isnan(row["median_ms"]) and "impossible latency" in row["reason"]
    assert len(loaded.warnings) == 1 and "prefill/llm_rmsnorm/default" in loaded.warnings[0]
    assert (loaded.table["median_ms"].dropna() > 0).all()


def _edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _at(data: dict[str, Any], cell: Cell) -> int:
    params = data["results"]["baselines.Baseline.track_latency"][1]
    return list(itertools.product(*params)).index(tuple(repr(x) for x in cell))


def _set(data: dict[str, Any], benchmark: str, column: str, cell: Cell, value: Any) -> None:
    data["results"][benchmark][data["result_columns"].index(column)][_at(data, cell)] = value


IMPOSSIBLE_VALUES = {  # where a value no measurement gives is read: what the one warning names
    "a latency": (lambda d: _set(d, "baselines.Baseline.track_latency", "result", ("prefill", "llm_rmsnorm",
                                                                                    "default"), -1.5),
                  "impossible latency (e.g. prefill/llm_rmsnorm/default = -1.5 ms)"),
    "a latency where no instance is": (lambda d: _set(d, "baselines.Baseline.track_latency", "result",
                                                      ("decode", "rl_dpo_loss", "eager"), -1.5),
                                       "impossible latency (e.g. decode/rl_dpo_loss/eager = -1.5 ms)"),
    "a quartile": (lambda d: _set(d, "baselines.Baseline.track_latency", "stats_q_25",
                                  ("prefill", "llm_rmsnorm", "default"), -1.5),
                   "1 q25 value(s) negative, infinite or absurd (e.g. prefill/llm_rmsnorm/default = -1.5)"),
    "a compile time": (lambda d: _set(d, "baselines.Baseline.track_compile_time", "result",
                                      ("prefill", "llm_rmsnorm", "default"), -1.5),
                       "1 compile_s value(s) negative, infinite or absurd (e.g. prefill/llm_rmsnorm/default = -1.5)"),
    "the launch floor": (lambda d: d["results"]["baselines.Host.track_launch_overhead"].__setitem__(0, [-1.5]),
                         "launch floor -1.5 us (baselines.Host.track_launch_overhead) is not a time a launch takes"),
}


@pytest.mark.parametrize("where", IMPOSSIBLE_VALUES)
def test_every_impossible_value_is_one_warning_naming_its_file_and_cell(tmp_path: Path, where: str) -> None:
    path = write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": 0.2}))
    change, said = IMPOSSIBLE_VALUES[where]
    _edit(path, change)
    loaded = results.load_results(tmp_path)
    assert len(loaded.warnings) == 1 and loaded.warnings[0].startswith(f"{path}: ") and said in loaded.warnings[0]


def test_impossible_samples_are_one_warning_naming_a_cell(tmp_path: Path) -> None:
    cell = {"median": 0.5, "samples": [0.5, -1.5, 0.5]}
    path = write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": cell}))
    loaded = results.load_results(tmp_path, with_samples=True)
    assert loaded.warnings == [f"{path}: 1 cell(s) with samples that are not positive finite numbers (e.g. "
                               "prefill/llm_rmsnorm/default): samples ignored"]


def test_an_impossible_latency_never_reaches_compare(tmp_path: Path) -> None:
    from tracker.analyse.compare import compare_runs

    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": -1.5}), commit="a" * 40)
    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": 0.2}), commit="b" * 40,
                      date_ms=1_767_225_700_000)
    c = compare_runs(tmp_path, "aaaa", "bbbb")
    assert any("impossible latency" in w for w in c.warnings)


def test_impossible_statistics_and_samples_are_read_as_na(tmp_path: Path) -> None:
    cell = {"median": 0.5, "ci": (-1.0, math.inf), "samples": [0.5, -2.0, 0.5]}
    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": cell}))
    loaded = results.load_results(tmp_path, with_samples=True)
    row = loaded.table.iloc[0]
    assert row["status"] == "ok" and math.isnan(row["ci_low"]) and math.isnan(row["ci_high"])
    assert row["samples"] is None
    assert any("ci_low" in w for w in loaded.warnings) and any("samples" in w for w in loaded.warnings)


@pytest.mark.parametrize("change, why", [
    (lambda d: d.update(params="x"), '"params" is not an object'),
    (lambda d: d.update(date=1_795_333_738_000_000_000), "between 2000 and 2100"),
    (lambda d: d.update(date=-5), "between 2000 and 2100"),
    (lambda d: d.update(commit_hash=["x"]), "commit_hash"),
    (lambda d: d.update(results=[1]), '"results" is not an object'),
    (lambda d: d["results"]["baselines.Baseline.track_latency"][0].__setitem__(0, "fast"), "'fast' is not a number"),
    (lambda d: d["results"]["baselines.Baseline.track_latency"].__setitem__(1, "x"), "skipped"),
    (lambda d: d["results"].__setitem__("deep", "[" * 100_000 + "]" * 100_000), "nested too deeply"),
])
def test_a_file_with_values_of_the_wrong_kind_is_skipped_with_a_warning_naming_it(tmp_path: Path, change: Any,
                                                                                   why: str) -> None:
    good = write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5}), commit="a" * 40)
    bad = write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.6}), commit="b" * 40,
                            date_ms=1_767_225_700_000)
    data = json.loads(bad.read_text())
    change(data)
    text = json.dumps(data)
    bad.write_text(text.replace('"' + "[" * 100_000, "[" * 100_000).replace("]" * 100_000 + '"', "]" * 100_000))
    loaded = results.load_results(tmp_path)
    assert set(loaded.table["commit"].astype(str)) == {"a" * 40}, loaded.warnings
    assert len(loaded.warnings) == 1 and bad.name in loaded.warnings[0] and why in loaded.warnings[0]
    assert good.exists()


def test_every_file_unreadable_is_one_clear_error(tmp_path: Path) -> None:
    path = write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5}))
    path.write_text("{corrupt")
    with pytest.raises(results.ResultsError, match="none of the 1 result file"):
        results.list_runs(tmp_path)
    path.unlink()
    good = write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5}))
    data = good.read_text()
    good.write_text(data[:-1] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}")  # its header still reads
    with pytest.raises(results.ResultsError, match="nested too deeply"):
        results.load_results(tmp_path)
