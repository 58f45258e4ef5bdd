"""`compile-baselines import-csv`: the study's CSV recorded as an asv run (tracker.store.studycsv), and one line of
what became of it."""

from __future__ import annotations

import argparse

from tracker.commands._options import POSITIVE, Commands, command, date_option, results_dir, results_dir_option


def add(commands: Commands) -> None:
    importing = command(commands, "import-csv", "turn the study's results CSV into asv results",
                        "compile-baselines import-csv tests/fixtures/study/raw_results.csv --machine h100 --torch "
                        "2.9.1 --gpu 'NVIDIA H100 80GB HBM3'")
    results_dir_option(importing)
    importing.add_argument("file", help="CSV with columns workload, shape_preset, domain, tag, mode, status, ...")
    importing.add_argument("--machine", required=True, help="asv machine name to record under")
    importing.add_argument("--torch", required=True, help="torch version the CSV was measured with, e.g. 2.9.1")
    importing.add_argument("--gpu", help="GPU name, e.g. 'NVIDIA H100 80GB HBM3'")
    importing.add_argument("--commit", help="commit hash (default: derived from the file's content)")
    importing.add_argument("--date", type=date_option(recorded=True), metavar="WHEN",
                           help="2026-11-23, 2026-11-23T10:00:00Z or ms since the epoch (default: the file's time)")
    importing.add_argument("--triton", help="triton version, if known")
    importing.add_argument("--driver", help="GPU driver version, if known")
    importing.add_argument("--cuda", help="CUDA version, if known")
    importing.add_argument("--launch-us", type=POSITIVE, help="the measuring host's launch floor, if known (us)")


def main(args: argparse.Namespace) -> int:
    from tracker.store.studycsv import import_study

    done = import_study(args.file, results_dir(args), args.machine, args.torch, args.gpu, args.commit, args.date,
                        triton=args.triton, driver=args.driver, cuda=args.cuda, launch_us=args.launch_us)
    skipped = f", {done.left_out} decode cells of decode-invariant workloads left out" if done.left_out else ""
    print(f"imported {done.cells} cells ({done.failed} failed{skipped}) from {args.file} as commit {done.commit[:12]} "
          f"on machine {args.machine} (torch {args.torch}): {done.written}")
    return 0
