"""`compile-baselines rm`: the runs a selection picks listed, and with --yes removed (tracker.store.remove), each line
said on stdout as it happens, the unreadable files on stderr."""

from __future__ import annotations

import argparse
import sys

from tracker.commands._options import Commands, command, date_option, results_dir, results_dir_option
from tracker.errors import UsageError
from tracker.paths import project_repo


def add(commands: Commands) -> None:
    rm = command(commands, "rm", "remove runs from the results (and their cells), like `asv rm`",
                 "compile-baselines rm --commit 1a2b3c4d          # lists what it would remove\n"
                 "compile-baselines rm --commit HEAD --machine h100 --yes\n"
                 "compile-baselines rm --torch 2.9 --until 2026-06-30 --yes",
                 more=" Selectors combine (all must hold). Without --yes nothing is removed: it lists what would be. "
                       "A blank selector, or one that matches no run, is refused (exit 2); a path that cannot be "
                       "written is refused before anything is moved (exit 1). What an interrupted rm left is rolled "
                       "back or finished by the next rm --yes or run.")
    results_dir_option(rm)
    rm.add_argument("--commit", help="a hash, a prefix, or a git ref such as HEAD~1")
    rm.add_argument("--machine", help="asv machine name")
    rm.add_argument("--torch", metavar="VERSION", help="torch version, or its start: 2.11 matches 2.11.0+cu130")
    rm.add_argument("--since", type=date_option(), metavar="WHEN",
                    help="runs whose commit date is on or after this (2026-11-23, 2026-11-23T10:00:00Z)")
    rm.add_argument("--until", type=date_option(end_of_day=True), metavar="WHEN",
                    help="runs whose commit date is on or before this (a bare date includes its whole day)")
    rm.add_argument("--cells-dir", help="the cell store (default: beside the results directory)")
    rm.add_argument("--yes", action="store_true", help="remove them (default: only list them)")


def main(args: argparse.Namespace) -> int:
    from tracker.store.cells import default_cells_dir
    from tracker.store.remove import Selection, rm

    results = results_dir(args)
    selection = Selection(args.commit, args.machine, args.torch, args.since, args.until)
    if selection.empty():
        raise UsageError("say which runs to remove: --commit, --machine, --torch, --since or --until")
    rm(results, args.cells_dir or default_cells_dir(results), selection, args.yes, repo_dir=project_repo(),
       say=print, warn=lambda line: print(line, file=sys.stderr))
    return 0
