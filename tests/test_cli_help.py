"""The help speaks to the user: every command has a one-line description and an example, every option says what
it takes, and dates are typed as people write them (ISO 8601) as well as ms since the epoch."""

from __future__ import annotations

import argparse

import pytest

from tracker import cli


def subparsers() -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_the_top_level_help_is_for_users(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "argument parsing" not in out and "the work is in the modules" not in out
    assert "the baseline your kernel has to beat" in out
    assert "compile-baselines compare --base HEAD~1 --head HEAD" in out and "exit status: 0 done" in out


def test_version_says_which_release_and_which_checkout(capsys: pytest.CaptureFixture[str]) -> None:
    import re
    import subprocess
    from importlib import metadata

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cli.ROOT, capture_output=True, text=True).stdout.strip()
    out = capsys.readouterr().out.strip()
    assert re.fullmatch(rf"compile-baselines {re.escape(metadata.version('compile-baselines'))} \(commit "
                        rf"{head[:12] or 'unknown'}, {re.escape(str(cli.ROOT))}\)", out), out


@pytest.mark.parametrize("name", list(subparsers()))
def test_every_command_has_a_description_an_example_and_helped_options(name: str) -> None:
    p = subparsers()[name]
    assert p.description and p.description[0].isupper() and p.description.rstrip().endswith(".")
    assert p.epilog and p.epilog.startswith("example:\n") and f"compile-baselines {name}" in p.epilog
    bare = [a.option_strings for a in p._actions if a.option_strings and not a.help]
    assert bare == [], f"{name}: options without help: {bare}"


def test_summary_format_says_what_each_format_is_for() -> None:
    (fmt,) = [a for a in subparsers()["summary"]._actions if a.dest == "format"]
    assert fmt.help and "table" in fmt.help and "json" in fmt.help


@pytest.mark.parametrize(("text", "ms"), [
    ("2026-11-23", 1795392000000),
    ("2026-11-23T10:00:00Z", 1795428000000),
    ("2026-11-23T10:00:00", 1795428000000),  # no offset: UTC
    ("2026-11-23T11:00:00+01:00", 1795428000000),
    ("1795428000000", 1795428000000),
])
def test_run_date_takes_iso_dates_or_ms_since_the_epoch(text: str, ms: int) -> None:
    assert cli.build_parser().parse_args(["run", "--date", text]).date == ms


def test_a_date_that_is_none_is_one_clear_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(["run", "--date", "23/11/2026"])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "compile-baselines run: error: argument --date: '23/11/2026' is not a date: give 2026-11-23, "
        "2026-11-23T10:00:00Z or ms since the epoch")
