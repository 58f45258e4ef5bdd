"""`compile-baselines summary`: the stable JSON shape, the latest run by default, text that fits 100 columns."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_results import instance, write_result_file

from tracker import cli
from tracker.errors import ToolError
from tracker.publish import summary
from tracker.store import results, studycsv

ROOT = Path(__file__).resolve().parent.parent
CPU_TINY = ROOT / "tests" / "fixtures" / "cpu-tiny" / "results"
STUDY_CSV = ROOT / "tests" / "fixtures" / "study" / "raw_results.csv"
MANCG = "max-autotune-no-cudagraphs"
PRESET_KEYS = {"instances", "wins", "tied_wins", "winners", "targets", "ties", "geomean_vs_eager", "head_to_head",
               "head_to_head_instances", "domain_wins", "host_bound", "notes", "kernels", "break_even",
               "too_noisy"}


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rd = tmp_path_factory.mktemp("summary") / "results"
    studycsv.import_csv(STUDY_CSV, rd, machine="study-h100", torch="2.9.1", gpu="NVIDIA H100 80GB HBM3",
                        date_ms=1_767_225_600_000, launch_us=6.5)
    return rd


def summary_command(results_dir: Path, fmt: str) -> int:
    return cli.main(["summary", "--results-dir", str(results_dir), "--format", fmt])


def test_summary_json_has_the_stable_shape(study_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert summary_command(study_dir, "json") == 0
    data = json.loads(capsys.readouterr().out)
    (run,) = data["runs"]
    assert {"commit", "machine", "gpu", "torch", "presets"} <= set(run)
    assert (run["machine"], run["gpu"], run["torch"], run["launch_us"]) == (
        "study-h100", "NVIDIA H100 80GB HBM3", "2.9.1", 6.5)
    assert set(run["presets"]) == {"prefill", "decode"}
    for p in run["presets"].values():
        assert set(p) == PRESET_KEYS
        assert list(p["wins"]) == ["eager", "default", "reduce-overhead", "max-autotune", MANCG]
        assert set(p["geomean_vs_eager"]) == {"default", "reduce-overhead", "max-autotune", MANCG}
        assert set(p["head_to_head"]) == {"default", MANCG}
        assert all(set(v) == {"wins", "avg_margin_pct"} for v in p["head_to_head"].values())
        assert all(set(d) == set(p["wins"]) for d in p["domain_wins"].values())
        assert all(isinstance(v, list) and len(v) > 1 for v in p["ties"].values())
        # of each mode's wins, those another mode ties with: every tie is one of its winner's wins
        assert all(0 <= p["tied_wins"][m] <= p["wins"][m] for m in p["wins"])
        assert sum(p["tied_wins"].values()) == len(p["ties"])
    prefill = run["presets"]["prefill"]
    assert prefill["wins"][MANCG] == 17 and prefill["geomean_vs_eager"][MANCG] == 2.0
    assert prefill["domain_wins"]["rl"] == {"eager": 0, "default": 2, "reduce-overhead": 0, "max-autotune": 0,
                                            MANCG: 1}
    # 6.5 us floor, k = 6: the study's fastest cells (~10-12 us) are host-bound on such a host
    assert "rl_dpo_loss" in prefill["host_bound"] and "llm_kl_divergence_loss" not in prefill["host_bound"]


def test_text_summary_reads_well_in_100_columns(study_dir: Path) -> None:
    text = summary.render_text(study_dir)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "prefill: 23 instances" in text and "decode: 18 instances" in text
    assert ("head-to-head over 23 instances: default 4 (avg margin 2.45%) vs max-autotune-no-cudagraphs 19 "
            "(avg margin 7.58%)") in " ".join(text.split())
    # the columns say what they count: wins, of them tied within noise, geomean vs eager
    assert next(line.split() for line in text.splitlines() if "vs eager" in line)[:5] == [
        "mode", "wins", "tied", "vs", "eager"]
    rows = [line.split()[1:4] for line in text.splitlines() if line.startswith("  max-autotune-no-cudagraphs ")]
    data = summary.summary_for(study_dir)[0]["runs"][0]["presets"]
    tied = [str(data[p]["tied_wins"][MANCG]) for p in ("prefill", "decode")]
    assert rows == [["17", tied[0], "2.000"], ["8", tied[1], "1.687"]]  # prefill, then decode


def test_markdown_summary_has_the_study_tables(study_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary_command(study_dir, "md")
    md = capsys.readouterr().out
    assert "| Mode | Wins | Of them tied | Geomean vs eager | Winning workloads |" in md
    tied = {p: summary.summary_for(study_dir)[0]["runs"][0]["presets"][p]["tied_wins"] for p in ("prefill", "decode")}
    assert f"| max-autotune-no-cudagraphs | 17 | {tied['prefill'][MANCG]} | 2.000 |" in md
    assert f"| default | 10 | {tied['decode']['default']} | 1.682 |" in md
    assert "| rl | 0 | 2 | 0 | 0 | 1 |" in md


def test_latest_run_by_default_and_any_run_on_request(tmp_path: Path) -> None:
    shutil.copytree(CPU_TINY, tmp_path / "results")
    latest = summary.summary_for(tmp_path / "results")[0]["runs"]
    assert [r["commit"][:8] for r in latest] == ["bc844535"]
    older = summary.summary_for(tmp_path / "results", commit="5d800df4")[0]["runs"]
    assert [r["commit"][:8] for r in older] == ["5d800df4"]
    text = summary.render_text(tmp_path / "results", machine="cpu-laptop")
    assert "cpu-laptop · commit bc844535" in text and "tiny: 2 instances" in text
    assert "launch floor 4.2 us" in text


def test_summary_takes_git_refs_and_never_guesses_the_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """--commit takes what compare and rm take (HEAD~1, a branch); with runs of several machines and no --machine,
    the summary refuses (exit 2, an input mistake, as its --help says) rather than pick one."""
    import subprocess

    from tracker import cli

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              check=True, capture_output=True, text=True).stdout

    repo, rd = tmp_path / "repo", tmp_path / "results"
    repo.mkdir()
    git("init", "-q")
    git("commit", "-q", "--allow-empty", "-m", "one")
    git("commit", "-q", "--allow-empty", "-m", "two")
    first, second = git("log", "--reverse", "--format=%H").split()
    cells = instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": 0.2})
    write_result_file(rd, cells, commit=first, machine="box")
    write_result_file(rd, cells, commit=second, machine="box", date_ms=1_767_225_700_000)
    monkeypatch.setenv("COMPILE_BASELINES_REPO", str(repo))
    assert cli.main(["summary", "--results-dir", str(rd), "--commit", "HEAD~1", "--format", "json"]) == 0
    assert [r["commit"] for r in json.loads(capsys.readouterr().out)["runs"]] == [first]
    write_result_file(rd, cells, commit=second, machine="other", date_ms=1_767_225_800_000)
    for argv in ([], ["--commit", "HEAD"]):
        assert cli.main(["summary", "--results-dir", str(rd), *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "results of several machines (box, other)" in err[0] and "pass --machine" in err[0]
    assert cli.main(["summary", "--results-dir", str(rd), "--machine", "box", "--commit", "HEAD"]) == 0


def test_all_torch_versions_of_the_latest_commit_are_shown(tmp_path: Path) -> None:
    cells = instance("prefill", "llm_rmsnorm", {"eager": 0.5, "default": 0.12})
    write_result_file(tmp_path, cells, commit="1" * 40, date_ms=1_767_225_600_001, env="a")
    write_result_file(tmp_path, cells, commit="2" * 40, date_ms=1_767_225_600_002, env="a")
    write_result_file(tmp_path, cells, commit="2" * 40, date_ms=1_767_225_600_002, env="b", torch="2.10.0")
    runs = summary.summary_for(tmp_path)[0]["runs"]
    assert {(r["commit"][0], r["torch"]) for r in runs} == {("2", "2.9.1"), ("2", "2.10.0")}


@pytest.mark.parametrize(("setup", "kwargs", "message"), [
    ("missing", {}, "does not exist"),
    ("empty", {}, "no asv result files"),
    ("cpu", {"commit": "ffff"}, "no results for commit 'ffff'"),
    ("cpu", {"machine": "h100"}, "no results for machine 'h100'"),
])
def test_nothing_to_summarise_is_a_clear_error(tmp_path: Path, setup: str, kwargs: dict[str, Any],
                                               message: str) -> None:
    rd = tmp_path / "results"
    if setup == "empty":
        rd.mkdir()
    elif setup == "cpu":
        shutil.copytree(CPU_TINY, rd)
    with pytest.raises(results.ResultsError, match=message) as e:
        summary.summary_for(rd, **kwargs)
    assert isinstance(e.value, ToolError)


def test_warnings_about_bad_files_go_to_stderr_one_line_each(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(CPU_TINY, tmp_path / "results")
    (tmp_path / "results" / "cpu-laptop" / "00000000-broken.json").write_text('{"version": 2, "res')
    assert summary_command(tmp_path / "results", "json") == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["runs"][0]["commit"].startswith("bc844535")
    (line,) = out.err.splitlines()
    assert line.startswith("warning: skipped ") and "00000000-broken.json" in line


def test_failures_and_excluded_instances_are_shown(tmp_path: Path) -> None:
    cells = instance("decode", "llm_rmsnorm", {"eager": None, "default": 0.012, MANCG: None})
    write_result_file(tmp_path, cells)
    text = summary.render_text(tmp_path)
    assert "note: llm_rmsnorm: no ok eager cell: left out of the geomeans" in text
    assert "note: llm_rmsnorm: failed: eager, max-autotune-no-cudagraphs" in text


def test_an_unknown_format_is_refused(study_dir: Path) -> None:
    with pytest.raises(ValueError, match="unknown summary format"):
        summary.render(summary.summary_for(study_dir)[0], "csv")


def test_head_to_head_only_where_both_modes_were_measured() -> None:
    # an eager + default run: max-autotune-no-cudagraphs was never measured, so there is no head-to-head
    data, _ = summary.summary_for(CPU_TINY)
    (tiny,) = data["runs"][0]["presets"].values()
    assert tiny["head_to_head_instances"] == 0
    text = summary.render(data, "table")
    assert "head-to-head default vs max-autotune-no-cudagraphs: not measured (no instance has both measured ok)" \
        in text
    assert "default 0" not in text
    md = summary.render(data, "md")
    assert "not measured (no instance has both measured ok)" in md


def test_what_to_beat_for_one_workload(capsys: pytest.CaptureFixture[str]) -> None:
    """`summary --workload llm_rmsnorm`: the everyday question "what do I have to beat for it?", answered for its
    instances alone (a real H100 run: tests/fixtures/h100-aa2, h100-d)."""
    from tracker import cli

    h100 = ROOT / "tests" / "fixtures" / "h100-aa2" / "results"
    argv = ["summary", "--results-dir", str(h100), "--machine", "h100-d"]
    assert cli.main([*argv, "--workload", "llm_rmsnorm"]) == 0
    text = capsys.readouterr().out
    targets = [line.split(":")[0].strip() for line in text.splitlines() if ": beat " in line]
    assert targets == ["llm_rmsnorm", "llm_rmsnorm"]  # prefill, then decode
    assert "prefill: 1 instance\n" in text and "decode: 1 instance\n" in text
    assert cli.main([*argv, "--workload", "llm_rmsnorm", "--format", "json"]) == 0
    presets = json.loads(capsys.readouterr().out)["runs"][0]["presets"]
    assert all(list(p["targets"]) == ["llm_rmsnorm"] and p["instances"] == 1 for p in presets.values())
    # a name that is no workload, and one the run did not measure: mistakes of the input, one line each
    assert cli.main([*argv, "--workload", "llm_rmsnrom"]) == 2
    assert "did you mean llm_rmsnorm?" in capsys.readouterr().err
    assert cli.main(["summary", "--results-dir", str(CPU_TINY), "--workload", "rl_dpo_loss"]) == 2
    assert "measured none of rl_dpo_loss; it measured " in capsys.readouterr().err
