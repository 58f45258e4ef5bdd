"""`compile-baselines report`: the HTML report written (tracker.publish.report); the results' warnings and where it
was written on stderr."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tracker.commands._options import Commands, command, results_dir, results_dir_option


def add(commands: Commands) -> None:
    report = command(commands, "report", "write a self-contained HTML report of the results",
                     "compile-baselines report --out site/report")
    results_dir_option(report)
    report.add_argument("--out", required=True, help="output directory")


def main(args: argparse.Namespace) -> int:
    from tracker.publish.report import write_report, written

    size = write_report(results_dir(args), args.out, warn=_warn)
    print(written(Path(args.out) / "index.html", size), file=sys.stderr)
    return 0


def _warn(line: str) -> None:
    print(line, file=sys.stderr)
