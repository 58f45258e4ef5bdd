"""`compile-baselines publish`: asv's site and the report beside it (tracker.publish.site); what was left out or
written besides, the report and the site on stderr."""

from __future__ import annotations

import argparse
import sys

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
    from tracker.publish.report import written
    from tracker.publish.site import REPORT_SUBDIR, publish

    done = publish(results_dir(args), workspace_subdir(args.config, HTML_SUBDIR), args.out, config=args.config,
                   warn=_warn)
    print(written(done.site / REPORT_SUBDIR / "index.html", done.report_bytes), file=sys.stderr)
    print(f"published {done.site / 'index.html'} (asv history, no network needed; open it as a file or serve it) and "
          f"{done.site / REPORT_SUBDIR / 'index.html'}", file=sys.stderr)
    return 0


def _warn(line: str) -> None:
    print(line, file=sys.stderr)
