"""import-csv: the study's raw-results format -> asv results; the published figures come out exactly."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tracker import cli
from tracker.analyse import best as analysis
from tracker.errors import ToolError, UsageError
from tracker.publish.summaryjson import summary_json
from tracker.store import asvfiles, results, studycsv
from workloads.names import DECODE_INVARIANT

ROOT = Path(__file__).resolve().parent.parent
STUDY_CSV = ROOT / "tests" / "fixtures" / "study" / "raw_results.csv"
CPU_TINY = ROOT / "tests" / "fixtures" / "cpu-tiny" / "results"
MANCG = "max-autotune-no-cudagraphs"
HEADER = "workload,shape_preset,domain,tag,mode,status,elapsed_wall_s,median_ms,p25_ms,p99_ms,error\n"


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The study's published raw results (tests/fixtures/study/PROVENANCE.md) imported as one run, and its summary."""
    rd = tmp_path_factory.mktemp("study") / "results"
    path = studycsv.import_csv(STUDY_CSV, rd, machine="study-h100", torch="2.9.1", gpu="NVIDIA H100 80GB HBM3",
                               cuda="13.0", date_ms=1_767_225_600_000)
    loaded = results.load_results(rd)
    summary = summary_json(loaded.table)
    return {"dir": rd, "file": path, "loaded": loaded, "run": summary["runs"][0]}


def test_study_csv_reproduces_published_prefill_wins(study: dict[str, Any]) -> None:
    p = study["run"]["presets"]["prefill"]
    assert p["instances"] == 23
    assert p["wins"] == {MANCG: 17, "default": 4, "max-autotune": 1, "eager": 1, "reduce-overhead": 0}
    by_mode: dict[str, set[str]] = {}
    for w, m in p["winners"].items():
        by_mode.setdefault(m, set()).add(w)
    assert by_mode["default"] == {"diff_scheduler_step", "llm_rope_apply", "rl_dpo_loss", "rl_grpo_loss"}
    assert by_mode["max-autotune"] == {"vlm_contrastive_nce_loss"}
    assert by_mode["eager"] == {"llm_topk_sampling_prep"}
    assert len(by_mode[MANCG]) == 17


def test_study_csv_reproduces_published_prefill_geomeans(study: dict[str, Any]) -> None:
    g = study["run"]["presets"]["prefill"]["geomean_vs_eager"]
    assert g == {MANCG: 2.000, "default": 1.874, "max-autotune": 1.254, "reduce-overhead": 1.224}


def test_study_csv_reproduces_published_prefill_head_to_head(study: dict[str, Any]) -> None:
    h = study["run"]["presets"]["prefill"]["head_to_head"]
    assert h == {MANCG: {"wins": 19, "avg_margin_pct": 7.58}, "default": {"wins": 4, "avg_margin_pct": 2.45}}


def test_study_csv_reproduces_published_decode_wins(study: dict[str, Any]) -> None:
    p = study["run"]["presets"]["decode"]
    assert p["instances"] == 18
    assert p["wins"] == {"default": 10, MANCG: 8, "max-autotune": 0, "reduce-overhead": 0, "eager": 0}
    assert {w for w, m in p["winners"].items() if m == "default"} == {
        "diff_cfg_blend", "diff_scheduler_step", "diff_unet_resblock", "llm_gelu_mlp", "llm_kl_divergence_loss",
        "llm_layernorm", "llm_moe_router", "llm_rope_apply", "llm_topk_sampling_prep", "rl_ppo_clipped_loss"}


def test_study_csv_reproduces_published_decode_geomeans_and_head_to_head(study: dict[str, Any]) -> None:
    p = study["run"]["presets"]["decode"]
    assert p["geomean_vs_eager"] == {MANCG: 1.687, "default": 1.682, "reduce-overhead": 0.862, "max-autotune": 0.859}
    assert p["head_to_head"] == {MANCG: {"wins": 8, "avg_margin_pct": 6.83},
                                 "default": {"wins": 10, "avg_margin_pct": 5.94}}


def test_study_medians_are_stored_exactly(study: dict[str, Any]) -> None:
    t = study["loaded"].table.set_index(["preset", "workload", "mode"])
    with open(STUDY_CSV, newline="") as f:
        for row in csv.DictReader(f):
            key = (row["shape_preset"], row["workload"], row["mode"])
            if row["shape_preset"] == "decode" and row["workload"] in DECODE_INVARIANT:
                continue  # the study's figures do not count them; see the next test
            assert t.loc[key, "median_ms"] == float(row["median_ms"])
    # no statistics are invented: the study kept no samples
    assert t["ci_low"].isna().all() and t["q25"].isna().all() and t["samples"].isna().all()
    assert t["compile_s"].isna().all()


def test_the_run_carries_the_given_machine_and_versions(study: dict[str, Any]) -> None:
    data = json.loads(study["file"].read_text())
    assert data["commit_hash"] == hashlib.sha1(STUDY_CSV.read_bytes()).hexdigest()  # no commit given
    assert data["date"] == 1_767_225_600_000
    p = data["params"]
    assert (p["machine"], p["torch"], p["gpu"], p["cuda"], p["triton"], p["driver"]) == (
        "study-h100", "2.9.1", "NVIDIA H100 80GB HBM3", "13.0", "unknown", "unknown")
    machine = json.loads((study["dir"] / "study-h100" / "machine.json").read_text())
    assert machine["torch"] == "2.9.1" and machine["machine"] == "study-h100"


def test_benchmark_descriptions_match_what_asv_wrote_in_a_real_run() -> None:
    real = json.loads(next(CPU_TINY.glob("cpu-laptop/5d800df4-*.json")).read_text())
    cols = real["result_columns"]
    described = studycsv.suite_benchmarks()
    # the run predates the compiles metrics: every benchmark it recorded is compared, the latency among them
    recorded = [name for name in described if name in real["results"]]
    assert asvfiles.METRIC_BENCHMARKS["latency"] in recorded
    for name in recorded:
        bench, row = described[name], real["results"][name]
        assert row[cols.index("params")] == bench["params"], name
        assert row[cols.index("version")] == bench["version"], name


def _write(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "study.csv"
    path.write_text(header + body)
    return path


def test_rows_are_deduplicated_and_an_ok_row_beats_a_failed_tag(tmp_path: Path) -> None:
    path = _write(tmp_path, "llm_rmsnorm,decode,llm,all,eager,ok,5.1,0.031,0.030,0.04,\n"
                            "llm_rmsnorm,decode,llm,norm,eager,ok,5.1,0.031,0.030,0.04,\n"
                            "llm_rmsnorm,decode,llm,all,default,error,20,,,,CUDA out of memory\n"
                            "llm_rmsnorm,decode,llm,norm,default,ok,20,0.012,0.011,0.02,\n"
                            "llm_rmsnorm,decode,llm,all,max-autotune,timeout,1800,,,,\n"
                            "llm_rmsnorm,decode,llm,all,reduce-overhead,error,25,,,,InductorError: boom\n"
                            "llm_rmsnorm,decode,llm,norm,reduce-overhead,error,25,,,,InductorError: boom\n")
    cells = {(c.mode): c for c in studycsv.read_study_csv(path)}
    assert len(cells) == 4
    assert cells["default"].ok and cells["default"].median_ms == 0.012
    assert not cells["reduce-overhead"].ok and cells["reduce-overhead"].reason == "InductorError: boom"
    assert cells["max-autotune"].reason == "status 'timeout' in the study's file"

    rd = tmp_path / "results"
    studycsv.import_csv(path, rd, machine="study", torch="2.9.1", commit="abc1234", date_ms=1_767_225_600_001)
    t = results.load_results(rd).table.set_index("mode")
    assert t.loc["reduce-overhead", "status"] == "failed"
    assert t.loc["reduce-overhead", "reason"] == "InductorError: boom"  # from the cell store beside the results
    assert t.loc["default", "status"] == "ok" and t.loc[MANCG, "status"] == "skipped"


@pytest.mark.parametrize(("body", "header", "message"), [
    ("x", "workload,shape_preset,mode,median_ms\n", "missing column.*domain, tag, status, elapsed_wall_s"),
    ("llm_flash,prefill,llm,all,eager,ok,5,1,1,1,\n", HEADER, "unknown workload 'llm_flash' \\(line 2\\)"),
    ("llm_rmsnorm,prefill,llm,all,turbo,ok,5,1,1,1,\n", HEADER, "unknown mode 'turbo'"),
    ("llm_rmsnorm,huge,llm,all,eager,ok,5,1,1,1,\n", HEADER, "unknown preset 'huge'"),
    ("llm_rmsnorm,prefill,llm,all,eager,ok,5,fast,1,1,\n", HEADER, "study.csv:2: median_ms 'fast' is not a number"),
    ("", HEADER, "no rows"),
])
def test_malformed_csv_is_a_clear_error(tmp_path: Path, body: str, header: str, message: str) -> None:
    with pytest.raises(studycsv.StudyCsvError, match=message) as e:
        studycsv.read_study_csv(_write(tmp_path, body, header))
    assert isinstance(e.value, ToolError)


def test_bad_commit_or_machine_name_is_a_usage_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "llm_rmsnorm,prefill,llm,all,eager,ok,5,0.5,0.5,0.6,\n")
    with pytest.raises(UsageError, match="hexadecimal"):
        studycsv.import_csv(path, tmp_path / "r", machine="m", torch="2.9.1", commit="study-2025")
    with pytest.raises(UsageError, match="machine name"):
        studycsv.import_csv(path, tmp_path / "r", machine="my machine", torch="2.9.1")


def test_the_study_is_one_point_of_a_history(study: dict[str, Any], tmp_path: Path) -> None:
    rd = tmp_path / "results"
    path = _write(tmp_path, "llm_rmsnorm,prefill,llm,all,eager,ok,5,0.5,0.5,0.6,\n"
                            "llm_rmsnorm,prefill,llm,all,default,ok,20,0.11,0.1,0.2,\n")
    studycsv.import_csv(STUDY_CSV, rd, machine="h100", torch="2.9.1", commit="1" * 40, date_ms=1_767_225_601_000)
    studycsv.import_csv(path, rd, machine="h100", torch="2.10.0", commit="2" * 40, date_ms=1_767_225_602_000,
                        launch_us=6.5)
    a = analysis.analyse(results.load_results(rd).table)
    by_torch = analysis.history(a, "torch")
    assert list(by_torch[by_torch["preset"] == "prefill"]["torch"].astype(str)) == ["2.9.1", "2.10.0"]
    assert list(analysis.history(a, "commit")["commit"].astype(str).str[0].unique()) == ["1", "2"]


def test_the_fixture_is_the_published_file_and_its_decode_invariant_rows_are_left_out() -> None:
    # the sha256 recorded in PROVENANCE.md: the file as published, byte for byte
    assert hashlib.sha256(STUDY_CSV.read_bytes()).hexdigest() == (
        "7bc0cdb1554385839660ce6f0d20276126654e1c1bd2737126a8153077f5e235")
    counts: dict[tuple[str, str, str], int] = {}
    for row in csv.DictReader(io.StringIO(STUDY_CSV.read_text())):
        key = (row["shape_preset"], row["workload"], row["mode"])
        counts[key] = counts.get(key, 0) + 1
    # every measurement listed once per tag, 2-3 times; 23 workloads x 5 modes in both presets
    assert len(counts) == 230 and set(counts.values()) == {2, 3}
    cells = studycsv.read_study_csv(STUDY_CSV)
    assert len(cells) == 205 and all(c.ok for c in cells)  # the published file has no failed cell
    assert not any(c.preset == "decode" and c.workload in DECODE_INVARIANT for c in cells)


def test_import_csv_says_what_became_of_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "llm_rmsnorm,prefill,llm,all,eager,ok,5,0.5,0.5,0.6,\n"
                            "llm_rmsnorm,prefill,llm,all,default,error,20,,,,boom\n")
    assert cli.main(["import-csv", str(path), "--results-dir", str(tmp_path / "r"), "--machine", "study", "--torch",
                     "2.9.1", "--commit", "abcdef1234", "--date", "1767225600005"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"imported 2 cells (1 failed) from {path} as commit abcdef1234 on machine study")
    assert "abcdef12-existing-study-csv.json" in out


def test_conflicting_duplicate_rows_are_refused_naming_both_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "llm_rmsnorm,prefill,llm,all,eager,ok,5,0.5,0.5,0.6,\n"
                            "llm_rmsnorm,prefill,llm,memory-bound,eager,ok,5,0.5,0.5,0.6,\n"
                            "llm_rmsnorm,prefill,llm,norm,eager,ok,5,0.9,0.8,1.0,\n")
    with pytest.raises(studycsv.StudyCsvError, match=r"lines 2 and 4 measure prefill/llm_rmsnorm/eager differently"):
        studycsv.read_study_csv(path)


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path: Path) -> None:
    path = tmp_path / "study.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (HEADER + "llm_rmsnorm,prefill,llm,all,eager,ok,5,0.5,0.5,0.6,\n").encode())
    (cell,) = studycsv.read_study_csv(path)
    assert cell.workload == "llm_rmsnorm" and cell.median_ms == 0.5


def test_a_zero_median_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "llm_rmsnorm,prefill,llm,all,eager,ok,5,0,0,0,\n")
    with pytest.raises(studycsv.StudyCsvError, match=r"study.csv:2: median_ms '0' is not a finite positive number"):
        studycsv.read_study_csv(path)


@pytest.mark.parametrize("date_ms", [1_795_333_738_000_000_000, 1_795_333_738, -1])
def test_an_implausible_date_is_refused_and_nothing_is_written(tmp_path: Path, date_ms: int) -> None:
    path = _write(tmp_path, "llm_rmsnorm,prefill,llm,all,eager,ok,5,0.5,0.5,0.6,\n")
    with pytest.raises(UsageError, match=r"^date .* ms since the epoch"):
        studycsv.import_csv(path, tmp_path / "r", machine="study", torch="2.9.1", date_ms=date_ms)
    assert not (tmp_path / "r").exists()


def test_import_csv_says_how_many_decode_invariant_cells_were_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["import-csv", str(STUDY_CSV), "--results-dir", str(tmp_path / "r"), "--machine", "study",
                     "--torch", "2.9.1", "--date", "1767225600006"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"imported 205 cells (0 failed, 25 decode cells of decode-invariant workloads left out) "
                          f"from {STUDY_CSV}")


def test_a_file_of_only_uncounted_cells_is_a_clear_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "rl_dpo_loss,decode,rl,loss,eager,ok,5,0.5,0.5,0.6,\n")
    with pytest.raises(studycsv.StudyCsvError, match="no cells the study counts"):
        studycsv.read_study_csv(path)
