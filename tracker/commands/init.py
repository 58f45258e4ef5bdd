"""`compile-baselines init`: its options and its handler."""

from __future__ import annotations

import argparse

from tracker.commands._options import Commands, command


def add(commands: Commands) -> None:
    init = command(
        commands, "init", "write what a kernel repository needs to plug its own workloads and kernels in",
        "compile-baselines init --dir ../my-kernels --namespace mykernels", more=(
            " The entry points (pyproject.toml, or the lines to add to yours), a workload skeleton with a "
            "tiny preset and a sweep, a candidate skeleton, the caller of the reusable workflow, pinned "
            "to this compile-baselines commit, and a .gitignore for what runs leave there (an existing one "
            "is added to). Existing files are never overwritten without --force."))
    init.add_argument("--dir", default=".", help="the repository to write into (default: here)")
    init.add_argument("--namespace", help="the workloads' namespace (default: from the directory's name)")
    init.add_argument("--ref", help="the compile-baselines commit the workflow pins (default: this checkout's HEAD)")
    init.add_argument("--force", action="store_true", help="overwrite files that exist")


def main(args: argparse.Namespace) -> int:
    from tracker.adopt.scaffold import init_main

    return init_main(args.dir, args.namespace, args.ref, args.force)
