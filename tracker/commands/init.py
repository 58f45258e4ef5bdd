"""`compile-baselines init`: a kernel repository's scaffold written (tracker.adopt.scaffold), and what was written and
what comes next said on stdout."""

from __future__ import annotations

import argparse
from pathlib import Path

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
    """What was written, the lines to add by hand to an existing pyproject.toml, and what comes next."""
    from tracker.adopt.scaffold import init

    scaffold, written, hand_edit = init(args.dir, args.namespace, args.ref, args.force)
    for path in written:
        print(f"wrote {path}")
    if hand_edit:
        print(f"\n{Path(args.dir) / 'pyproject.toml'} exists and was left as it is: add these lines to it\n")
        print(hand_edit)
    print(f"next (docs/plugins.md): pip install -e {args.dir} beside compile-baselines; `compile-baselines list` "
          f"then shows {scaffold.namespace}.silu. Commit the repository (git init; git add -A; git commit), and from "
          f"inside it `compile-baselines run --workload '{scaffold.namespace}.*'` measures it, recorded under its "
          "commit into its .asv/")
    return 0
