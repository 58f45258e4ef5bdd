"""What the commands' parsers share: the types that check a value as it is parsed, a subcommand with its summary
and example, the options several commands take, and the results directory those options name."""

from __future__ import annotations

import argparse
import math
import textwrap
from collections.abc import Callable
from typing import Any

RESULTS_HELP = ("asv results directory (default: .asv/results of the kernel repository it runs in or "
                "COMPILE_BASELINES_REPO names, else asv.conf.json's)")

Commands = Any  # argparse's subparsers action, whose class argparse keeps private


def number(kind: type, minimum: float, strict: bool) -> Callable[[str], Any]:
    """An argparse type: a finite number of `kind` above `minimum` (or at least it, unless `strict`)."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < minimum or (strict and value == minimum):
            raise argparse.ArgumentTypeError(f"{text!r}: give a number {'>' if strict else '>='} {minimum:g}")
        return value

    return parse


POSITIVE, NON_NEGATIVE, COUNT = number(float, 0, True), number(float, 0, False), number(int, 0, False)
AT_LEAST_ONE = number(int, 1, False)
AT_LEAST_TWO = number(int, 2, False)


def date_option(end_of_day: bool = False, recorded: bool = False) -> Callable[[str], int]:
    """An argparse type: ms since the epoch or an ISO date/time (tracker.store.commits.parse_date_ms); `recorded`:
    a run's date, which asv takes between 2000 and 2100 (tracker.store.asvjson.date_problem)."""
    def parse(text: str) -> int:
        from tracker.store.asvjson import date_problem
        from tracker.store.commits import parse_date_ms

        try:
            ms = parse_date_ms(text, end_of_day)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        if recorded and (problem := date_problem(ms)):
            raise argparse.ArgumentTypeError(problem)
        return ms
    return parse


def factor(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 1 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"takes a ratio of at least 1, e.g. 1.1 for 10%, not {text!r}")
    return value


def command(commands: Commands, name: str, summary: str, example: str, more: str = "") -> argparse.ArgumentParser:
    """A subcommand: `summary` in the command list and atop its --help, then `more`; `example` under it."""
    text = textwrap.fill(summary[0].upper() + summary[1:] + "." + more, 100)
    return commands.add_parser(name, help=summary, description=text,
                               epilog="example:\n  " + example.replace("\n", "\n  "),
                               formatter_class=argparse.RawDescriptionHelpFormatter)


def results_dir_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--results-dir", help=RESULTS_HELP)


def timing_options(command: argparse.ArgumentParser) -> None:
    timing = command.add_argument_group("measurement settings (defaults: the study's, but run's --rep-ms)")
    timing.add_argument("--warmup-ms", type=NON_NEGATIVE, default=100.0, help="do_bench warmup budget (ms)")
    timing.add_argument("--rep-ms", type=POSITIVE, default=None,
                        help="do_bench measurement budget (ms; default: measure 1000, the study's; run 500 a cell)")
    timing.add_argument("--warmup-calls", type=COUNT, default=20, help="direct calls after compiling")
    timing.add_argument("--time-limit", type=POSITIVE, default=None, help="seconds for a whole cell, compile included")
    timing.add_argument("--cpu-threads", type=AT_LEAST_ONE, default=1, metavar="N",
                        help="on a CPU: the threads a cell compiles its kernels for and runs on (default 1: steady "
                             "timings on a shared or busy host)")


def results_dir(args: argparse.Namespace) -> str:
    """The results directory --results-dir names, else --config's (tracker.store.asvfiles.results_dir_for)."""
    from tracker.store import asvfiles

    return asvfiles.results_dir_for(args.config, args.results_dir)
