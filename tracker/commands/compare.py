"""`compile-baselines compare`: two runs compared (tracker.publish.comparison: picked, judged, rendered) as a table,
markdown or JSON, to a file or stdout; the runs picked, the warnings and the headline on stderr; exit 3 when --fail-on
holds."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tracker.analyse.verdicts import EXIT_FAIL_ON, EXIT_OK, FAIL_ON, TESTS
from tracker.commands._options import COUNT, Commands, command, factor, results_dir, results_dir_option
from tracker.errors import UsageError
from tracker.paths import project_repo
from tracker.publish.units import FORMATS

if TYPE_CHECKING:
    from tracker.publish.comparison import CompareRequest


def add(commands: Commands) -> None:
    compare = command(
        commands, "compare", "base vs head: which cells changed beyond noise, and which best modes",
        "compile-baselines compare\n"
        "compile-baselines compare --base HEAD~1 --head HEAD --only-changed --factor 1.2\n"
        "compile-baselines compare --base main --head 1a2b3c4d --format md --out comment.md\n"
        "compile-baselines compare --machine h100-c --head-machine h100-d\n"
        "compile-baselines compare --base-torch 2.9.1 --head-torch 2.11.0 --format table\n"
        "compile-baselines compare --base C1 --head C2 --base-torch 2.11 --head-torch 2.12 --attribute",
        more=" Without --base and --head: the machine's latest two runs (by date), or with --head-machine "
             "the two machines' latest runs. With --base-torch and "
             "--head-torch: head's latest run with that torch, base's at the same commit or the nearest. "
             "With --attribute, when both the commit and torch differ: which of them moved each change.")
    results_dir_option(compare)
    _which_runs_options(compare)
    _verdict_options(compare)
    _confirm_options(compare)


def _which_runs_options(compare: argparse.ArgumentParser) -> None:
    compare.add_argument("--base", help="base commit: a hash, a prefix, or a git ref such as HEAD~1, a branch or a "
                                        "tag (default: the run before head)")
    compare.add_argument("--head", help="head commit, as --base (default: the machine's latest run)")
    compare.add_argument("--machine", help="asv machine name (needed when several are present)")
    compare.add_argument("--head-machine", help="the head's machine, when it differs (one machine per PyTorch "
                                                "version, two hosts); without --base and --head: each machine's "
                                                "latest run")
    compare.add_argument("--base-torch", metavar="VERSION",
                         help="compare torch versions: the base's, or its start (2.11 matches 2.11.0+cu130); with "
                              "--head-torch")
    compare.add_argument("--head-torch", metavar="VERSION",
                         help="compare torch versions: the head's; with --base-torch")


def _verdict_options(compare: argparse.ArgumentParser) -> None:
    compare.add_argument("--format", choices=FORMATS,
                         help="table: for a terminal (default on a terminal), what the PR comment says; md: the PR "
                              "comment (default into a pipe or --out); json: a stable shape for scripts")
    compare.add_argument("--only-changed", action="store_true",
                         help="list only the cells, best modes and kernel speedups that changed, and the cells the "
                              "headline names (too noisy, unconfirmed, source unchanged)")
    compare.add_argument("--factor", type=factor, metavar="F",
                         help="also require a change beyond F (e.g. 1.2: 20%% slower or faster) on top of the noise "
                              "rule; only ever makes a verdict stricter")
    compare.add_argument("--fail-on", choices=FAIL_ON, default="never", help="exit 3 when this happens")
    compare.add_argument("--out", help="write the comparison here instead of standard output")
    compare.add_argument("--allow-cross-versions", action="store_true",
                         help="compare across GPUs or PyTorch versions")


def _confirm_options(compare: argparse.ArgumentParser) -> None:
    compare.add_argument("--confirm", action="store_true",
                         help="before judging, measure every cell that moved again at head, in this checkout (its "
                              "code, its torch, a GPU host), in 3 more fresh compiles (not a compiled cell whose "
                              "generated code is unchanged: its move cannot count); count only changes that hold on "
                              "them all")
    compare.add_argument("--confirmed-only", action="store_true",
                         help="count only changes whose head cells have 3 compiles (after a --confirm); list the rest "
                              "as unconfirmed")
    compare.add_argument("-j", "--jobs", type=COUNT, help="with --confirm: cells at once (default as for run)")
    compare.add_argument("--history", nargs="+", default=[], metavar="DIR",
                         help="results directories whose runs of the same GPU and torch tell each cell's noise, "
                              "beside the head machine's own earlier runs (docs/verdicts.md)")
    compare.add_argument("--test", choices=TESTS, default=TESTS[0],
                         help="noise: each cell against its own noise, the comparison's false alarms kept under 5%% "
                              "(default); bands: the fixed bands of earlier versions")
    compare.add_argument("--attribute", action="store_true",
                         help="when both the commit and torch differ between base and head: say which one moved each "
                              "best baseline and significant cell, from a cross run (head's commit under base's "
                              "torch, or base's commit under head's), or name the one `run` that decides it "
                              "(docs/versions.md)")


def main(args: argparse.Namespace) -> int:
    if args.confirm and (args.base is None or args.head is None or args.base_torch):
        raise UsageError("--confirm needs --base and --head (the runs to confirm a change between)")
    if (args.base_torch is None) != (args.head_torch is None):
        raise UsageError("--base-torch and --head-torch go together: compare one torch version with another")
    from tracker.analyse.confirm import COMPILES
    from tracker.publish.comparison import CompareRequest

    if args.confirm:
        _confirm(args)
    request = CompareRequest(
        results_dir(args), args.base, args.head, args.machine, args.head_machine, args.allow_cross_versions,
        factor=args.factor, confirm=(0, COMPILES) if args.confirm or args.confirmed_only else (0, 0), test=args.test,
        repo_dir=project_repo(), base_torch=args.base_torch, head_torch=args.head_torch, history=args.history,
        attribute_changes=args.attribute)
    return show(request, _compare_format(args), args.fail_on, args.out, args.only_changed)


def show(request: CompareRequest, fmt: str, fail_on: str = "never", out: str | os.PathLike[str] | None = None,
         only_changed: bool = False) -> int:
    """The comparison in `fmt` to `out` or stdout; on stderr the runs picked for it (when base or head was not
    given), its warnings and its headline (unless a table on the terminal showed it). Exit 0, or EXIT_FAIL_ON (3)
    when `fail_on` holds."""
    from tracker.publish.comparison import compare, pick, render, verdict_line
    from tracker.store import atomic

    request, picked = pick(request)
    if picked:
        print(f"compare: {picked}", file=sys.stderr)
    compared = compare(request)
    c = compared.comparison
    for w in c.warnings:
        print(f"warning: {w}", file=sys.stderr)
    text = render(compared, fmt, only_changed)
    if out is not None:
        atomic.write_text(out, text)
    else:
        sys.stdout.write(text)
    failed = c.fails(fail_on)
    # A table on the terminal has just shown the headline; a file, a pipe or a CI log gets it on stderr
    if failed or fmt != "table" or out is not None or not sys.stdout.isatty():
        print(verdict_line(c, fail_on), file=sys.stderr)
    return EXIT_FAIL_ON if failed else EXIT_OK


def _confirm(args: argparse.Namespace) -> None:
    """compare --confirm: measure again at head, in this checkout, each cell that moved."""
    from tracker.runner.remeasure import confirm_head
    from tracker.store import asvfiles

    confirm_head(asvfiles.load_conf(Path(args.config), results_dir(args)), args.base, args.head, args.machine,
                 args.head_machine, args.allow_cross_versions, jobs=args.jobs, repo_dir=project_repo(),
                 history=args.history)


def _compare_format(args: argparse.Namespace) -> str:
    """--format, else a table on a terminal and markdown (the PR comment, as before) into a pipe or --out."""
    if args.format:
        return str(args.format)
    return "table" if args.out is None and sys.stdout.isatty() else "md"
