"""The CLI's promise for hostile input: one clear line and a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_results import instance, write_result_file

from tracker import cli

REPO = Path(__file__).resolve().parents[1]


def _one_error_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line and not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith(f"compile-baselines {command}: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_a_closed_pipe_ends_list_quietly_with_the_status_of_sigpipe() -> None:
    script = "import sys\nfrom tracker import cli\nsys.exit(cli.main(['list']))"
    p = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.readline()
    p.stdout.close()  # `| head -1`
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141  # 128 + SIGPIPE, as a shell reports `yes | head -1`'s yes
    assert err == "", err


@pytest.mark.parametrize("command", ["report", "compare"])
def test_out_where_a_file_stands_in_place_of_a_directory_is_one_line(tmp_path: Path, command: str,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    write_result_file(results, instance("prefill", "llm_rmsnorm", {"eager": 0.5}), commit="a" * 40)
    write_result_file(results, instance("prefill", "llm_rmsnorm", {"eager": 0.4}), commit="b" * 40,
                      date_ms=1_767_225_700_000)
    (tmp_path / "afile").write_text("keep me")
    out = tmp_path / "afile" / ("site" if command == "report" else "c.md")
    argv = [command, "--results-dir", str(results), "--out", str(out)]
    if command == "compare":
        argv += ["--base", "aaaa", "--head", "bbbb"]
    assert cli.main(argv) == 1
    line = _one_error_line(capsys.readouterr().err, command)
    assert "afile" in line
    assert (tmp_path / "afile").read_text() == "keep me"


def test_report_into_a_read_only_directory_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    write_result_file(results, instance("prefill", "llm_rmsnorm", {"eager": 0.5}))
    out = tmp_path / "ro"
    out.mkdir()

    def read_only(*args: object, dir: str, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", dir)

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    assert cli.main(["report", "--results-dir", str(results), "--out", str(out)]) == 1
    assert "Permission denied" in _one_error_line(capsys.readouterr().err, "report")
    assert list(out.iterdir()) == []


def test_a_bare_missing_key_says_which_and_where() -> None:
    def lookup() -> None:
        {}["samples_ms"]

    try:
        lookup()
    except KeyError as e:
        message = str(cli._message(e))
    assert message.startswith("missing key 'samples_ms' (in test_cli_errors.py:")
    assert cli._message(KeyError("unknown metric 'x'")) == "unknown metric 'x'"


def test_summary_of_unreadable_files_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5}))
    path.write_text("{corrupt")
    assert cli.main(["summary", "--results-dir", str(tmp_path)]) == 1
    assert path.name in _one_error_line(capsys.readouterr().err, "summary")


@pytest.mark.parametrize("argv", [
    ["measure", "--preset", "tiny", "--workload", "llm_rmsnorm", "--mode", "eager", "--rep-ms", "0"],
    ["measure", "--preset", "tiny", "--workload", "llm_rmsnorm", "--mode", "eager", "--warmup-ms", "-1"],
    ["measure", "--preset", "tiny", "--workload", "llm_rmsnorm", "--mode", "eager", "--rep-ms", "nan"],
    ["run", "--cell-timeout", "0"],
    ["import-csv", "x.csv", "--machine", "m", "--torch", "2", "--launch-us", "-3"],
])
def test_measurement_settings_must_be_positive(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2 and "give a number" in capsys.readouterr().err


def test_run_refuses_a_date_in_nanoseconds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--commit", "abc1234", "--date", "1795333738000000000", "--results-dir", str(tmp_path / "r"),
            "--workload", "llm_rmsnorm", "--mode", "eager"]
    assert cli.main(argv) == 1
    assert "ms since the epoch" in _one_error_line(capsys.readouterr().err, "run")
    assert not (tmp_path / "r").exists()


def test_summary_of_a_run_where_every_cell_failed_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": None, "default": None}))
    assert cli.main(["summary", "--results-dir", str(tmp_path)]) == 0
    assert "warning: no cell measured ok: 2 failed" in capsys.readouterr().err


def test_compare_names_the_unreadable_file_a_missing_run_may_be_in(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    base = write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.5}), commit="a" * 40)
    write_result_file(tmp_path, instance("prefill", "llm_rmsnorm", {"eager": 0.4}), commit="b" * 40,
                      date_ms=1_767_225_700_000)
    base.write_text(base.read_text()[:100])
    assert cli.main(["compare", "--results-dir", str(tmp_path), "--base", "aaaa", "--head", "bbbb"]) == 1
    line = _one_error_line(capsys.readouterr().err, "compare")
    assert "no results for commit 'aaaa'" in line and "could not be read" in line and base.name in line


def test_run_on_the_cpu_refuses_gpus_before_measuring(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--device", "cpu", "--gpus", "2", "--commit", "abc1234", "--results-dir", str(tmp_path / "r"),
            "--workload", "llm_rmsnorm", "--mode", "eager"]
    assert cli.main(argv) == 2
    assert "--gpus picks CUDA devices" in _one_error_line(capsys.readouterr().err, "run")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("argv", [
    ["run", "--replicates", "0"], ["run", "--replicates", "-1"], ["run", "--replicates", "1.5"], ["run", "-j", "-1"],
    ["compare", "--confirm", "-j", "-2"], ["pr", "--base", "HEAD", "--head", "HEAD", "-j", "-4"],
])
def test_counts_below_their_least_are_usage_errors_before_anything_is_written(
        tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "r"
    with pytest.raises(SystemExit) as e:
        cli.main([*argv, "--results-dir", str(results)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and ("give a number >=" in err or "is not a number" in err)
    assert not results.exists() and not list(tmp_path.iterdir())
