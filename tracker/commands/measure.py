"""`compile-baselines measure`: one cell measured in this process (tracker.measure.onecell) and printed as a table or
JSON; exit 1 when it failed or was skipped."""

from __future__ import annotations

import argparse
import json
import sys

from tracker.commands._options import Commands, command, timing_options
from workloads.names import MODES


def add(commands: Commands) -> None:
    measure = command(
        commands, "measure", "measure one cell in this process, without asv, and print it",
        "compile-baselines measure --preset tiny --workload llm_rmsnorm --mode default\n"
        "compile-baselines measure --preset decode --workload llm_rmsnorm --kernel triton_rmsnorm --json", more=(
            " Its compile time is the first call's with inductor's compile cache, which is kept between commands:"
            " warm once the cell was compiled, so faster than run's, which gives each cell a fresh cache (cold;"
            " run --warm-cache keeps one). The output says which it was."))
    measure.add_argument("--preset", required=True, help="input shapes: tiny runs on a CPU (see `list`)")
    measure.add_argument("--workload", required=True, metavar="WORKLOAD", help="see `list`")
    what = measure.add_mutually_exclusive_group(required=True)
    what.add_argument("--mode", choices=MODES, help="eager or a torch.compile mode")
    what.add_argument("--kernel", metavar="NAME", help="a registered candidate of WORKLOAD instead of a mode")
    measure.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda when available")
    measure.add_argument("--json", action="store_true", help="print the result as JSON")
    measure.add_argument("--all-samples", action="store_true", help="with --json: include every sample")
    measure.add_argument("--cudagraph-mark-step", action="store_true",
                         help="call torch.compiler.cudagraph_mark_step_begin() before each call (not the study's way)")
    timing_options(measure)


def main(args: argparse.Namespace) -> int:
    from tracker.measure.harness import Settings
    from tracker.measure.hostinfo import busy_warning
    from tracker.measure.onecell import measure

    settings = Settings(warmup_ms=args.warmup_ms, rep_ms=args.rep_ms or Settings.rep_ms,
                        warmup_calls=args.warmup_calls, time_limit_s=args.time_limit,
                        cudagraph_mark_step=args.cudagraph_mark_step, cpu_threads=args.cpu_threads)
    mode = f"kernel:{args.kernel}" if args.kernel else args.mode
    measured = measure(args.preset, args.workload, mode, args.device, settings)
    result = measured.result
    if args.json:
        print(json.dumps(measured.as_json(args.all_samples), indent=1))
    else:
        for k, v in measured.rows(f"{args.preset} / {args.workload} / {mode}"):
            print(f"{k:>13}  {v}")
    if result.status == "skipped":  # nothing measured: the work asked for was not done
        print(f"compile-baselines measure: skipped: {result.reason}", file=sys.stderr)
    elif result.device == "cpu" and (warning := busy_warning()):  # said of the timings just taken
        print(f"measure: warning: {warning}", file=sys.stderr)
    return 0 if result.ok else 1
