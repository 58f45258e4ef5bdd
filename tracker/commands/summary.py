"""`compile-baselines summary`: a run's wins, geomeans, margins and ties (tracker.publish.summary) as a table,
markdown or JSON."""

from __future__ import annotations

import argparse
import sys

from tracker.commands._options import Commands, command, results_dir, results_dir_option
from tracker.paths import project_repo
from tracker.publish.units import FORMATS


def add(commands: Commands) -> None:
    summary = command(commands, "summary", "wins, geomeans, margins, domains, ties of the latest (or a given) run",
                      "compile-baselines summary\ncompile-baselines summary --commit HEAD~1 --format md\n"
                      "compile-baselines summary --workload llm_rmsnorm      # what to beat for it")
    results_dir_option(summary)
    summary.add_argument("--commit", help="a hash, a prefix, or a git ref such as HEAD~1 (default: the latest run)")
    summary.add_argument("--machine", help="asv machine name (needed when several are present)")
    summary.add_argument("--workload", nargs="+", metavar="WORKLOAD",
                         help="only these workloads, names or NAMESPACE.* (the baseline to beat for them; the wins and "
                              "geomeans then count their instances alone)")
    summary.add_argument("--format", choices=FORMATS, default="table",
                         help="table: text for a terminal (default); md: markdown; json: a stable shape for scripts")


def main(args: argparse.Namespace) -> int:
    """The run's tables on stdout; warnings about skipped files on stderr."""
    from tracker.publish.summary import render, summary_for
    from workloads import catalog

    summary, warnings = summary_for(results_dir(args), args.commit, args.machine, repo_dir=project_repo(),
                                    workloads=catalog.expand(args.workload) if args.workload else None)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    sys.stdout.write(render(summary, args.format))
    return 0
