"""`compile-baselines pr`: the PR flow (tracker.flows.pr: both sides measured in pairs, compared, the comment handed
to GitHub's forge), its progress on stderr; exit 3 when the comparison finds what --fail-on names."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from tracker.analyse.verdicts import EXIT_FAIL_ON, EXIT_OK, FAIL_ON
from tracker.commands._options import AT_LEAST_TWO, COUNT, POSITIVE, Commands, command, results_dir, results_dir_option
from tracker.errors import UsageError
from tracker.paths import project_repo
from tracker.runner import policy
from workloads.names import MODES

if TYPE_CHECKING:
    from tracker.analyse.changes import Comparison


def add(commands: Commands) -> None:
    pr = command(commands, "pr", "measure what a PR changed at base and head (at once on a GPU host), compare, "
                 "comment", "compile-baselines pr --base origin/main --head HEAD --repo OWNER/NAME --pr 42")
    results_dir_option(pr)
    pr.add_argument("--base", required=True, help="base ref")
    pr.add_argument("--head", required=True, help="head ref")
    pr.add_argument("--repo", help="OWNER/NAME to comment on (with --pr)")
    pr.add_argument("--pr", type=int, help="pull request number (with --repo)")
    pr.add_argument("-j", "--jobs", type=COUNT,
                    help="cells at once, both sides together (default: run's); from 2 on, base and head run at once, "
                         "half each, their timings alternating on the GPU")
    pr.add_argument("--machine", help="asv machine name (default: hostname)")
    pr.add_argument("--preset", nargs="+", help="default: as run's")
    pr.add_argument("--mode", nargs="+", choices=MODES, help="only these modes (default: all five)")
    pr.add_argument("--workload", nargs="+", metavar="WORKLOAD",
                    help="measure only these among what the PR changed: names or NAMESPACE.* (a kernel repository)")
    pr.add_argument("--fail-on", choices=FAIL_ON, default="never", help="exit 3 when this happens")
    pr.add_argument("--always-comment", action="store_true", help="create the comment even when nothing changed")
    pr.add_argument("--history", nargs="+", default=[], metavar="DIR",
                    help="results directories whose runs of the same GPU and torch tell each cell's noise (the "
                         "nightly's results branch); where only kernels under test changed, a run there of this "
                         "machine and torch and of the base's workload code is their baseline")
    pr.add_argument("--budget", type=POSITIVE, default=policy.PR_BUDGET_S, metavar="SECONDS",
                    help=f"wall time for measuring (default {policy.PR_BUDGET_S:.0f}): base and head are measured in "
                         "pairs, round after round, while cells are undecided; the first round runs whatever the "
                         "budget (on one GPU, several modules' workloads may take longer), a later one, while time is "
                         "left, the changes awaiting confirmation and the undecided cells it is expected to finish "
                         "within it")
    pr.add_argument("--max-compiles", type=AT_LEAST_TWO, default=10, metavar="N",
                    help="the most compiles a side a cell gets (default 10)")
    pr.add_argument("--compiles", type=AT_LEAST_TWO, metavar="N",
                    help="exactly N paired compiles a side for every cell, whatever the verdicts (a measurement of "
                         "the real change; no budget)")
    pr.add_argument("--full", action="store_true",
                    help="every cell in pairs at base and head even where only kernels under test changed (by "
                         "default their baseline, the modes' cells, is measured once for both sides, or taken from a "
                         "--history run of the base's workload code)")
    pr.add_argument("--whole-modules", action="store_true",
                    help="every workload of a changed module of workloads (by default only those whose definitions "
                         "the change touched, and those a definition they use reaches: a comment reaches none)")


def main(args: argparse.Namespace) -> int:
    if (args.repo is None) != (args.pr is None):
        raise UsageError("--repo and --pr go together")
    # What the change selects is read off the workloads' modules, which import torch (seconds): imported beside the
    # flow's own imports and git's answers rather than after them
    threading.Thread(target=importlib.import_module, args=("workloads.registry",), daemon=True).start()
    from tracker.flows.pr import PrRequest, pr
    from tracker.flows.rounds import Budget
    from tracker.github.forge import GitHubForge
    from tracker.runner import gpus
    from workloads import catalog

    forge = GitHubForge.for_pr(args.repo, args.pr, os.environ, only_on_change=not args.always_comment)
    devices = gpus.listed()  # nvidia-smi, asked once
    request = PrRequest(args.base, args.head, Path(results_dir(args)),
                        args.jobs or policy.default_jobs_here(devices),  # both sides together: at once on a GPU host
                        args.machine, args.preset, args.mode, catalog.expand(args.workload) if args.workload else None,
                        args.history, args.fail_on, Budget(args.budget, args.max_compiles, args.compiles),
                        project_repo(), args.full, args.whole_modules)
    return exit_code(pr(request, forge, devices=devices, log=sys.stderr), args.fail_on)


def exit_code(comparison: Comparison | None, fail_on: str) -> int:
    """3 when the PR's comparison finds what --fail-on names, else 0 (and 0 when the PR changed no workload)."""
    return EXIT_FAIL_ON if comparison is not None and comparison.fails(fail_on) else EXIT_OK
