"""One module a command of `compile-baselines`: its parser (`add`, the subcommand's options, help and examples) and
its handler (`main`: a typed request from what was parsed, the library function that does the work, and what the
user sees of its result: the lines printed and the exit code). tracker.cliparse builds the parser from them,
tracker.cli dispatches to them."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from tracker.commands import (
    bisect,
    comment,
    compare,
    import_csv,
    init,
    issue,
    measure,
    merge,
    pr,
    publish,
    report,
    results,
    rm,
    run,
    summary,
    track,
)
from tracker.commands import list as list_
from tracker.commands._options import Commands


@dataclass(frozen=True)
class Command:
    add: Callable[[Commands], None]  # registers the subcommand's parser
    main: Callable[[argparse.Namespace], int]  # does the command; its exit code
    interrupted: str = ""  # what an interrupt leaves behind, said after "interrupted" (the others leave nothing)


_MEASURED = "; finished cells are kept, run again to resume"

# In the order `--help` lists them.
COMMANDS: dict[str, Command] = {
    "list": Command(list_.add, list_.main),
    "measure": Command(measure.add, measure.main),
    "run": Command(run.add, run.main, _MEASURED),
    "merge": Command(merge.add, merge.main, "; the files listed as merged are complete, the others untouched: merge "
                                            "again to finish (merging the same input twice gives the same result)"),
    "summary": Command(summary.add, summary.main),
    "import-csv": Command(import_csv.add, import_csv.main),
    "compare": Command(compare.add, compare.main, _MEASURED),
    "rm": Command(rm.add, rm.main, "; the runs listed as removed are gone, the others untouched: rm again finishes or "
                                   "rolls back the one it was removing"),
    "pr": Command(pr.add, pr.main, _MEASURED),
    "bisect": Command(bisect.add, bisect.main, "; the runs of the steps that finished are in the results directory"),
    "issue": Command(issue.add, issue.main),
    "comment": Command(comment.add, comment.main),
    "report": Command(report.add, report.main),
    "init": Command(init.add, init.main),
    "publish": Command(publish.add, publish.main),
    "results": Command(results.add, results.main),
    "track": Command(track.add, track.main),
}

__all__ = ["COMMANDS", "Command"]
