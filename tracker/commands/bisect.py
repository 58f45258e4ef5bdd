"""`compile-baselines bisect`: the bisection (tracker.flows.bisect: paired rounds at midpoints of the range) as text on
stdout and as the tracking issue's section in --out; its progress on stderr."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tracker.commands._options import AT_LEAST_TWO, COUNT, POSITIVE, Commands, command, results_dir, results_dir_option
from tracker.paths import project_repo

if TYPE_CHECKING:
    from tracker.flows.bisect import Bisected


def add(commands: Commands) -> None:
    bisect = command(
        commands, "bisect", "find the commit between a good and a bad one that moved the cells named, measuring them "
        "in pairs at midpoints of the range",
        "compile-baselines bisect --good v1.2 --bad main --cell prefill/llm_rmsnorm/default\n"
        "compile-baselines bisect --good HEAD~8 --bad HEAD --from-machine h100 --confirmed-only --out bisect.md", more=(
            " Each step measures a commit of the first-parent history between them against the range's good end, both"
            " compiled fresh in pairs round after round until each cell is decided (as pr does), and calls it good,"
            " bad or skipped (it cannot be measured, or stays undecided); about log2(commits) steps. The first"
            " step measures bad against good: what changed there, and which way, is the change. The runs of the"
            " commits measured after good go into the results directory as machine --machine (docs/runner.md)."))
    results_dir_option(bisect)
    bisect.add_argument("--good", required=True, help="a commit without the change (a ref or a hash)")
    bisect.add_argument("--bad", required=True, help="a later commit with it")
    bisect.add_argument("--cell", nargs="+", default=[], metavar="P/W/M", help="the cells that changed")
    bisect.add_argument("--instance", nargs="+", default=[], metavar="P/W",
                        help="instances whose best baseline changed: their winners at either end (with "
                             "--from-machine), else their every mode")
    bisect.add_argument("--from-machine", metavar="M",
                        help="the machine whose stored runs of good and bad show the change: without --cell or "
                             "--instance, the instances whose best baseline changed there; when torch changed between "
                             "the two runs too, which one moved it (compare --attribute)")
    bisect.add_argument("--confirmed-only", action="store_true",
                        help="of --from-machine's changes, only those measured again at bad (after compare --confirm)")
    bisect.add_argument("--machine", help="asv machine name its runs are recorded as (default: the --from-machine "
                                          "or the hostname, then -bisect)")
    bisect.add_argument("--history", nargs="+", default=[], metavar="DIR",
                        help="results directories whose runs of the same GPU and torch tell each cell's noise")
    bisect.add_argument("-j", "--jobs", type=COUNT, help="cells at once, both sides together (default: run's)")
    bisect.add_argument("--budget", type=POSITIVE, default=900.0, metavar="SECONDS",
                        help="wall time in all (default 900); no step starts with less time left than a step took, "
                             "and past it the narrowed range is named")
    bisect.add_argument("--max-compiles", type=AT_LEAST_TWO, default=10, metavar="N",
                        help="the most compiles a side a cell gets in a step (default 10)")
    bisect.add_argument("--out", help="write the result as a markdown section of the tracking issue (only when there "
                                      "was a change to bisect)")


def main(args: argparse.Namespace) -> int:
    from tracker.flows.bisect import BisectRequest, bisect
    from tracker.flows.rounds import Budget
    from tracker.runner import policy

    request = BisectRequest(args.good, args.bad, args.cell, args.instance, Path(results_dir(args)), args.machine,
                            args.from_machine, args.confirmed_only, args.history,
                            args.jobs or policy.default_jobs_here(), Budget(args.budget, args.max_compiles),
                            Path(args.out) if args.out else None, project_repo())
    return show(bisect(request, log=sys.stderr), request.from_machine, request.out)


def show(bisected: Bisected, from_machine: str | None, out: Path | None) -> int:
    """The bisection as text on stdout, and as the tracking issue's section in `out`; when there was nothing to
    bisect, that said and `out` removed. Exit 0."""
    from tracker.publish.bisection import render_md, render_text
    from tracker.store import atomic

    if bisected.bisection is None:
        print(f"bisect: no best baseline changed between {bisected.good[:8]} and {bisected.bad[:8]} on "
              f"{from_machine}: nothing to bisect")
        if out is not None:
            out.unlink(missing_ok=True)
        return 0
    print(render_text(bisected.bisection), end="")
    if out is not None:
        atomic.write_text(out, render_md(bisected.bisection))
    return 0
