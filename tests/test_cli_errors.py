"""The CLI's promise for hostile input: one clear line and a non-zero exit, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_results import instance, write_result_file

from tracker import cli
from tracker.errors import ToolError, UsageError
from workloads.errors import UnknownName, WorkloadClash

REPO = Path(__file__).resolve().parents[1]


def _one_error_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line and not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith(f"compile-baselines {command}: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.slow
def test_a_closed_pipe_ends_list_quietly_with_the_status_of_sigpipe() -> None:
    script = "import sys\nfrom tracker import cli\nsys.exit(cli.main(['list']))"
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head -1` gone before list writes (its 2.5 KB would otherwise fit the pipe's buffer)
    p = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=write_end, stderr=subprocess.PIPE)
    os.close(write_end)
    assert p.stderr is not None
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


@pytest.mark.parametrize("bug", [KeyError("samples_ms"), ValueError("could not convert string to float: 'x'"),
                                 TypeError("unhashable type: 'list'"), AttributeError("'NoneType' has no 'x'")])
def test_a_bug_is_a_traceback_never_a_usage_error(monkeypatch: pytest.MonkeyPatch, bug: Exception) -> None:
    """Only the tool's own errors are one line; any other exception out of a command is a bug, and its traceback
    (exit 1 from the interpreter) says where, rather than passing for a mistake in the command line."""
    def broken(args: object) -> int:
        raise bug

    monkeypatch.setitem(cli.COMMANDS, "list", broken)
    with pytest.raises(type(bug)):
        cli.main(["list"])


@pytest.mark.parametrize(("error", "code", "line"), [
    (ToolError("cannot read x"), 1, "cannot read x"),
    (UsageError("say which runs to remove"), 2, "say which runs to remove"),
    (UsageError("is one of never, regression, not 'x'", parameter="fail_on"), 2,
     "--fail-on is one of never, regression, not 'x'"),
    (UnknownName("unknown workload 'x'; choose from a, b"), 2, "unknown workload 'x'; choose from a, b"),
    (WorkloadClash("workload 'a.b' is declared twice by a"), 1, "workload 'a.b' is declared twice by a"),
    # what the system refused (a full disk, a missing file): the tool could not do it
    (FileNotFoundError(2, "No such file or directory", "x.json"), 1, "No such file or directory: x.json"),
])
def test_the_tool_s_errors_are_one_line_with_the_exit_code_of_their_kind(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: Exception, code: int,
        line: str) -> None:
    """exit 1: the tool could not do it; 2: what was asked is wrong (a library's parameter named as its option)."""
    def failing(args: object) -> int:
        raise error

    monkeypatch.setitem(cli.COMMANDS, "list", failing)
    assert cli.main(["list"]) == code
    assert _one_error_line(capsys.readouterr().err, "list") == f"compile-baselines list: error: {line}"


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


@pytest.mark.parametrize("command", [["run", "--commit", "abc1234", "--workload", "llm_rmsnorm", "--mode", "eager"],
                                     ["import-csv", "x.csv", "--machine", "m", "--torch", "2"]])
def test_a_date_in_nanoseconds_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 command: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main([*command, "--date", "1795333738000000000", "--results-dir", str(tmp_path / "r")])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"compile-baselines {command[0]}: error: argument --date: date 1795333738000000000 is not in ms since the "
        "epoch between 2000 and 2100 (seconds or nanoseconds given for ms?)")
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


@pytest.mark.parametrize(("argv", "says"), [
    (["run", "--machine", "bad/name"], "machine name 'bad/name': use letters"),
    (["run", "--commit", "not-a-ref"], "commit 'not-a-ref' is not a hexadecimal git hash"),
    (["compare", "--base-torch", "2.9"], "--base-torch and --head-torch go together"),
    (["compare", "--head-torch", "2.9", "--confirm"], "--confirm needs --base and --head"),
])
def test_a_value_the_command_line_gives_that_cannot_be_used_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    results = tmp_path / "r"
    assert cli.main([*argv, "--results-dir", str(results), "--workload" if argv[0] == "run" else "--machine",
                     "llm_rmsnorm" if argv[0] == "run" else "m"]) == 2
    assert says in _one_error_line(capsys.readouterr().err, argv[0])
    assert not results.exists()


def test_an_asv_config_that_is_no_json_is_one_line_naming_it(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "asv.conf.json"
    config.write_text("not json")
    assert cli.main(["--config", str(config), "summary"]) == 1  # as a missing one: the tool could not read it
    assert f"cannot read asv config {config}: " in _one_error_line(capsys.readouterr().err, "summary")


@pytest.mark.parametrize(("argv", "command"), [(["run", "--replicates", "0"], "run"),
                                               (["results", "bogus"], "results"),
                                               (["compare", "--format", "xml"], "compare")])
def test_a_mistake_the_parser_finds_is_one_line_too(argv: list[str], command: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    _one_error_line(capsys.readouterr().err, command)


AA2 = REPO / "tests" / "fixtures" / "h100-aa2" / "results"  # two runs of commit 759ff183, machines h100-c and h100-d


def test_a_machine_without_results_is_a_mistake_of_the_input(capsys: pytest.CaptureFixture[str]) -> None:
    """`summary --machine nosuch` names the machines there are and exits 2, as a missing --machine does."""
    assert cli.main(["summary", "--results-dir", str(AA2), "--machine", "nosuch"]) == 2
    line = _one_error_line(capsys.readouterr().err, "summary")
    assert line.endswith("no results for machine 'nosuch'; machines with results: h100-c, h100-d")


@pytest.mark.parametrize("command", ["summary", "compare", "pr"])
def test_a_ref_that_is_no_commit_reads_the_same_in_every_command(tmp_path: Path, command: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    ref = "HEAD~99999"
    argv = {"summary": ["summary", "--results-dir", str(AA2), "--machine", "h100-c", "--commit", ref],
            "compare": ["compare", "--results-dir", str(AA2), "--machine", "h100-c", "--base", ref, "--head",
                        "759ff183"],
            "pr": ["pr", "--results-dir", str(tmp_path / "results"), "--base", ref, "--head", "HEAD"]}[command]
    assert cli.main(argv) == 2
    line = _one_error_line(capsys.readouterr().err, command)
    assert line.startswith(f"compile-baselines {command}: error: '{ref}' is not a commit of the repository at ")
    assert not (tmp_path / "results").exists()  # pr measured nothing


def test_a_commit_git_knows_without_results_names_the_commits_that_have_some(
        capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["summary", "--commit"], ["compare", "--head", "759ff183", "--base"]):
        assert cli.main([*command[:1], "--results-dir", str(AA2), "--machine", "h100-c", *command[1:], "HEAD"]) == 2
        line = _one_error_line(capsys.readouterr().err, command[0])
        assert "no results for 'HEAD' (commit " in line and line.endswith("latest commits with results: 759ff183")


def test_an_option_the_command_does_not_have_names_the_command_and_the_closest_option(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["summary", "--comit", "HEAD~1"])
    assert e.value.code == 2
    assert capsys.readouterr().err == ("compile-baselines summary: error: unrecognized argument --comit; did you mean "
                                       "--commit?\n")
    with pytest.raises(SystemExit):
        cli.main(["results", "previous", "--machine", "m", "--brnch", "b"])
    assert capsys.readouterr().err.startswith("compile-baselines results previous: error: unrecognized argument "
                                              "--brnch; did you mean --branch?")
    with pytest.raises(SystemExit):
        cli.main(["list", "extra"])
    assert capsys.readouterr().err == ("compile-baselines list: error: unrecognized argument extra "
                                       "(`compile-baselines list --help` lists its options)\n")
