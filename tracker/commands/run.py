"""`compile-baselines run`: the cells asked for (tracker.runner.request: refused before anything is measured) measured
and recorded (tracker.runner.suite), what it measures and notes on stderr, the outcome and the summary on stdout."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tracker.commands._options import (
    AT_LEAST_ONE,
    COUNT,
    POSITIVE,
    Commands,
    command,
    date_option,
    results_dir_option,
    timing_options,
)
from tracker.errors import UsageError
from workloads.modes import AUTOTUNED_MODES
from workloads.names import MODES

if TYPE_CHECKING:
    from tracker.runner.forkserver import ForkServer
    from tracker.runner.request import RunRequest


def add(commands: Commands) -> None:
    run = command(
        commands, "run", "measure cells (a fresh process each) and record them as asv results, then print the summary",
        "compile-baselines run --workload llm_rmsnorm llm_layernorm -j 4\n"
        "compile-baselines run --commit v1.2 --date 2026-11-23", more=(
            " An interrupted run resumes: finished cells are kept (the cell store) and not measured again."
            " Exit status: 0 when the cells were measured and recorded (failed cells too: a failure is data),"
            " 1 when nothing was recorded (every cell skipped, e.g. prefill on a CPU host) or the run failed (a"
            " measurement the cell store could not keep, a full disk: the run stops, what was kept before stays),"
            " 2 for a mistake in the arguments."))
    run.add_argument("--preset", nargs="+",
                     help="default: tiny on CPU, prefill+decode on CUDA (and plugins' presets likewise; see `list`)")
    run.add_argument("--workload", nargs="+", metavar="WORKLOAD",
                     help="names, or NAMESPACE.* for a plugin's workloads (default: all, plugins' included)")
    run.add_argument("--mode", nargs="+", choices=MODES, help="default: all five")
    run.add_argument("--kernel", nargs="+", metavar="K",
                     help="kernels under test: all (default), none, NAME or WORKLOAD:NAME (see `list`)")
    run.add_argument("--machine", help="asv machine name (default: hostname)")
    run.add_argument("--commit", help="record under this commit: a hash or a git ref (default: HEAD)")
    run.add_argument("--date", type=date_option(recorded=True), metavar="WHEN",
                     help="the commit's date, as asv orders runs: 2026-11-23, 2026-11-23T10:00:00Z (UTC unless an "
                          "offset is given) or ms since the epoch (default: from git, else now)")
    run.add_argument("-j", "--jobs", type=COUNT,
                     help="cells at once (default, or 0: 1 on CPU; on CUDA one per core, up to 16 a GPU and 32 in all)")
    run.add_argument("--shard", help="i/n: run the i-th of n cost-balanced shards (one a host)")
    run.add_argument("--gpus", metavar="SPEC",
                     help="the GPUs of this host to measure on, all of one model: all (default), N (the first N), "
                          "or indices 0,2,5")
    run.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda when available")
    results_dir_option(run)
    run.add_argument("--cells-dir", help="the cell store (default: beside the results directory)")
    run.add_argument("--cell-timeout", type=POSITIVE, default=1800.0, help="kill a cell's process after this (s)")
    run.add_argument("--warm-cache", help="persistent compile cache directory (default: cold, a fresh one per cell, "
                                          "so compile times are a first compile's; `measure` reuses inductor's own)")
    run.add_argument("--retry-failed", action="store_true", help="measure failed cells again")
    run.add_argument("--replicates", type=AT_LEAST_ONE, default=None, metavar="N",
                     help=f"fresh compiles per cell of the autotuned modes ({', '.join(AUTOTUNED_MODES)}), "
                          "each in its own process; the best is recorded with the spread (default: 3 on CUDA, 1 on "
                          "CPU; a cell already measured gets the replicates it lacks)")
    run.add_argument("--replicate-all-modes", action="store_true", help="--replicates applies to every mode")
    run.add_argument("--fresh-processes", action="store_true",
                     help="every measurement in a process of its own (default: a cell's first does; its further "
                          "compiles may go to a process done with another cell, its compiler state cleared)")
    run.add_argument("--cell", nargs="+", metavar="P/W/M",
                     help="only these cells, PRESET/WORKLOAD/MODE (how a candidate change is re-measured)")
    timing_options(run)


def main(args: argparse.Namespace) -> int:
    from tracker.runner.forkserver import early

    # The measuring processes' server imports torch for seconds: it starts before this process imports it
    # (tracker.runner.request), not after; the compiler is imported there once the cells ask for it (run_suite)
    server = early()
    try:
        return _main(args, server)
    finally:
        server.close()


def _main(args: argparse.Namespace, server: ForkServer) -> int:
    from tracker.runner.request import RunRequest

    request = RunRequest(
        presets=args.preset, workloads=args.workload, modes=args.mode, kernels=args.kernel, cells=args.cell,
        shard=_parse_shard(args.shard), device=args.device, gpus=args.gpus, machine=args.machine, commit=args.commit,
        date_ms=args.date, jobs=args.jobs, cells_dir=args.cells_dir, cell_timeout_s=args.cell_timeout,
        warm_cache=args.warm_cache, retry_failed=args.retry_failed, replicates=args.replicates,
        replicate_all_modes=args.replicate_all_modes, fresh_processes=args.fresh_processes,
        warmup_ms=args.warmup_ms, rep_ms=args.rep_ms,
        warmup_calls=args.warmup_calls, time_limit_s=args.time_limit, cpu_threads=args.cpu_threads)
    return _run(request, Path(args.config), args.results_dir, server)


def _run(request: RunRequest, config: Path, results_dir: str | None, server: ForkServer) -> int:
    """Measure the cells asked for and record them into `results_dir` (None: the default, then a note says where
    plugin workloads were filed), then print the outcome and the summary; exit 0 (failed cells are data)."""
    from tracker.measure.hostinfo import busy_warning
    from tracker.runner.progress import PROGRESS_ONLY
    from tracker.runner.request import notes, prepare
    from tracker.runner.suite import run_suite

    run = prepare(request, config, results_dir)
    cfg = run.config
    print(f"run: commit {cfg.commit[:12]}, machine {cfg.machine}, device {cfg.device}"
          + (f" ({len(cfg.gpus)} GPUs: {','.join(cfg.gpus)})" if len(cfg.gpus) > 1 else "")
          + f", presets {', '.join(run.presets)}"
          + (f", shard {request.shard[0]}/{request.shard[1]}" if request.shard else ""), file=sys.stderr)
    for note in notes(run, results_dir is None):
        print(f"run: note: {note}", file=sys.stderr)
    if cfg.device == "cpu" and (warning := busy_warning()):
        print(f"run: warning: {warning}", file=sys.stderr)
    outcome = run_suite(run.cells, cfg, run.conf, run.date_ms, server=server)
    failed = [(c, r) for c, r in outcome.cells.items() if r.status == "failed"]
    print(f"\n{len(outcome.cells)} cells: {outcome.count('ok')} ok, {len(failed)} failed, "
          f"{outcome.count('skipped')} skipped in {outcome.wall_s:.0f} s; results: {outcome.results_file}")
    for cell, r in failed:
        print(f"  failed: {cell}: {r.reason[:150]}")
    if os.environ.get(PROGRESS_ONLY, "") in ("", "0"):
        _print_summary(run.conf.results_dir, cfg.commit, cfg.machine)
    return 0


def _print_summary(results_dir: str, commit: str, machine: str) -> None:
    try:
        from tracker.publish import summary
    except ImportError:
        return
    print()
    print(summary.render_text(results_dir, commit=commit, machine=machine))


def _parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard takes i/n, e.g. 1/4, not {text!r}") from None
    if not 1 <= i <= n:
        raise UsageError(f"--shard {text}: i must be between 1 and n")
    return i, n
