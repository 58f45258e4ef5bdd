"""`compile-baselines merge`: shards' results directories combined into one (tracker.store.merge), a line for each
file written."""

from __future__ import annotations

import argparse
from pathlib import Path

from tracker.commands._options import Commands, command, results_dir


def add(commands: Commands) -> None:
    merge = command(commands, "merge", "combine the results directories of shards into one",
                    "compile-baselines merge shard1/results shard2/results --results-dir .asv/results",
                    more=" A measurement wins over a failure; merging the same shards again changes nothing (a "
                          "retried step is safe); a directory merged into itself is refused; a folder it would write "
                          "into that is not writable is refused before anything is written.")
    merge.add_argument("sources", nargs="+", help="asv results directories of the shards")
    merge.add_argument("--results-dir", help="destination (default: as for run)")
    merge.add_argument("--cells-dir", nargs="+", metavar="DIR",
                       help="the shards' cell stores, whose failure reasons come along (default: beside each source)")
    merge.add_argument("--dest-cells-dir", help="the destination's cell store (default: beside --results-dir)")


def main(args: argparse.Namespace) -> int:
    from tracker.store.merge import merge_results

    written = merge_results([Path(s) for s in args.sources], Path(results_dir(args)),
                            cells_dirs=[Path(c) for c in args.cells_dir] if args.cells_dir else None,
                            dest_cells=Path(args.dest_cells_dir) if args.dest_cells_dir else None)
    for path in written:
        print(f"merged into {path}")
    return 0
