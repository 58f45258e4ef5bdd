"""`compile-baselines results fetch|store|previous`: results on a git branch (tracker.store.resultsbranch), one
line of what became of them."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from tracker.commands._options import Commands, command, results_dir, results_dir_option
from tracker.paths import project_repo


def add(commands: Commands) -> None:
    results = command(
        commands, "results", "fetch results from a git branch, store results on it, find a machine's previous run",
        "compile-baselines results store shard1/results shard2/results --branch asv-results\n"
        "compile-baselines results previous --branch asv-results --machine h100-torch-stable\n"
        "compile-baselines results fetch --branch asv-results --machine h100-torch-stable --commit C "
        "--results-dir R", more=(
            " The branch holds a results directory (one folder per machine) and is read from and pushed to "
            "a remote of the repository, with git's credentials or GITHUB_TOKEN (docs/runner.md)."))
    actions = results.add_subparsers(dest="action", required=True, metavar="ACTION")
    _results_fetch(actions)
    _results_store(actions)
    _results_previous(actions)


def _action(actions: Commands, name: str, summary: str, example: str) -> argparse.ArgumentParser:
    """An action of `results`: `summary` in its list and atop its --help, `example` under it."""
    action = command(actions, name, summary, example)
    action.add_argument("--remote", default="origin", help="the git remote the branch is on (default: origin)")
    return action


def _results_fetch(actions: Commands) -> None:
    fetch = _action(actions, "fetch", "copy results from the branch into a results directory: all, a machine's or "
                    "one run's", "compile-baselines results fetch --branch asv-results --machine h100-torch-stable "
                    "--commit 1a2b3c4d")
    fetch.add_argument("--branch", required=True, help="the branch the results are on (none yet: nothing fetched)")
    fetch.add_argument("--machine", help="only this machine's results")
    fetch.add_argument("--commit", help="only the runs of this commit (a hash, a prefix or a git ref), with their "
                                        "machine.json")
    fetch.add_argument("--results-dir", help="where to (default: as for run); its machine.json and benchmarks.json "
                                             "files are kept")


def _results_store(actions: Commands) -> None:
    store = _action(actions, "store", "merge results into the branch's tip and push it; merged again on the new tip "
                    "after a push race",
                    "compile-baselines results store .asv/results --branch asv-results --note 'nightly'")
    store.add_argument("sources", nargs="+", help="asv results directories to store (as `merge` combines them)")
    store.add_argument("--branch", required=True, help="the branch to store on (created when it does not exist)")
    store.add_argument("--note", help="added to the commit message in parentheses, e.g. which CI run stored them")


def _results_previous(actions: Commands) -> None:
    previous = _action(actions, "previous", "print the nearest earlier first-parent commit with a run of the machine "
                       "(or nothing)", "compile-baselines results previous --branch asv-results --machine "
                       "h100-torch-stable")
    previous.add_argument("--machine", required=True, help="asv machine name (one per kind of GPU and PyTorch line)")
    previous.add_argument("--commit", default="HEAD", help="the commit to look back from (default: HEAD)")
    previous.add_argument("--branch", help="the runs on this branch (default: those in --results-dir)")
    results_dir_option(previous)


def main(args: argparse.Namespace) -> int:
    if args.action == "fetch":
        return _fetch(args)
    if args.action == "store":
        return _store(args)
    return _previous(args)


def _fetch(args: argparse.Namespace) -> int:
    """One line, what was fetched; exit 0, also when the branch does not exist."""
    from tracker.store.resultsbranch import fetch_results

    remote, dest = _remote(args), Path(results_dir(args))
    written = fetch_results(remote, args.branch, dest, args.machine, args.commit, project_repo())
    if written is None:
        print(f"{remote.name} has no branch {args.branch} yet: nothing fetched")
    else:
        print(f"fetched {len(written)} file{'s' if len(written) != 1 else ''} from {args.branch} into {dest}")
    return 0


def _store(args: argparse.Namespace) -> int:
    from tracker.store.resultsbranch import store_results

    remote = _remote(args)
    pushed = store_results(remote, args.branch, [Path(s) for s in args.sources], args.note)
    if pushed is None:
        print(f"no new results to store: {args.branch} has them all")
    else:
        print(f"stored on {args.branch} of {remote.name} as {pushed.commit[:12]}")
    return 0


def _previous(args: argparse.Namespace) -> int:
    """The commit's full hash on stdout, or nothing (and why on stderr): from the branch's runs with --branch, else
    the results directory's."""
    from tracker.store.resultsbranch import previous_run

    if args.branch is not None:
        found = previous_run(args.machine, args.commit, project_repo(), remote=_remote(args), branch=args.branch)
        where = f"branch {args.branch}"
    else:
        results = Path(results_dir(args))
        found = previous_run(args.machine, args.commit, project_repo(), results_dir=results)
        where = str(results)
    if found is None:
        print(f"{args.machine}: no earlier measured commit than {args.commit} in {where}", file=sys.stderr)
    else:
        print(found)
    return 0


def _remote(args: argparse.Namespace) -> Any:
    """--remote of the repository, git authenticated with GITHUB_TOKEN when set (made only when used: in Actions it
    masks the token in the log)."""
    from tracker.github.gitauth import git_env
    from tracker.store.gitbranch import Remote

    return Remote(project_repo(), args.remote, git_env(os.environ))
