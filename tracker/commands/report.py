"""`compile-baselines report`: its options and its handler."""

from __future__ import annotations

import argparse

from tracker.commands._options import Commands, command, results_dir, results_dir_option


def add(commands: Commands) -> None:
    report = command(commands, "report", "write a self-contained HTML report of the results",
                     "compile-baselines report --out site/report")
    results_dir_option(report)
    report.add_argument("--out", required=True, help="output directory")


def main(args: argparse.Namespace) -> int:
    from tracker.publish.report import report_main

    return report_main(results_dir(args), args.out)
