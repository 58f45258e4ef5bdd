"""`compile-baselines publish`: its options and its handler."""

from __future__ import annotations

import argparse

from tracker.commands._options import Commands, command, results_dir, results_dir_option
from tracker.paths import HTML_SUBDIR, workspace_subdir


def add(commands: Commands) -> None:
    publish = command(commands, "publish", "asv publish (renders with no network) plus the report next to it",
                      "compile-baselines publish --out site",
                      more=" The output directory is replaced whole, so it must be new, empty, or a site publish "
                            "wrote (marked by its .compile-baselines-site file).")
    results_dir_option(publish)
    publish.add_argument("--out", help="output directory (default: .asv/html of the kernel repository it runs in, "
                                       "else asv.conf.json's html_dir): new, empty, or a site publish wrote")


def main(args: argparse.Namespace) -> int:
    from tracker.publish.site import publish_main

    return publish_main(results_dir(args), workspace_subdir(args.config, HTML_SUBDIR), args.out, config=args.config)
