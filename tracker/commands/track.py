"""`compile-baselines track`: the nightly's tracking issue body (tracker.publish.nightly), written only when a best
baseline changed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tracker.commands._options import Commands, command, results_dir, results_dir_option
from tracker.paths import project_repo


def add(commands: Commands) -> None:
    track = command(
        commands, "track", "compare each machine measured at a commit with its previous run, and the machines with "
        "each other", "compile-baselines track --out issue.md --confirmed-only --attribute", more=(
            " What the nightly's tracking issue says: the comparisons in which a best baseline changed, one "
            "section each, are written to --out; without any, --out is removed (docs/runner.md)."))
    results_dir_option(track)
    track.add_argument("--out", required=True,
                       help="the tracking issue's body (written only when a best baseline changed)")
    track.add_argument("--commit", default="HEAD", help="the commit measured (default: HEAD)")
    track.add_argument("--machine", nargs="+",
                       help="only these machines (default: every machine measured at the commit)")
    track.add_argument("--confirmed-only", action="store_true",
                       help="against the previous run, count only changes measured again at head (after compare "
                            "--confirm)")
    track.add_argument("--attribute", action="store_true",
                       help="against the previous run: when the commit and torch both changed, which one moved each "
                            "change")
    track.add_argument("--allow-cross-versions", action="store_true",
                       help="against the previous run: torch or the GPU may differ (the machines are always compared "
                            "across versions)")
    track.add_argument("--fail-on", choices=("best-change", "never"), default="never",
                       help="exit 3 when a best baseline changed")
    track.add_argument("--bisections", metavar="DIR",
                       help="a folder of bisect --out sections (the GPU jobs'): appended to the body when it is "
                            "written")


def main(args: argparse.Namespace) -> int:
    """One line: the body written, or none. Exit 0, or 3 with --fail-on best-change when a best baseline changed."""
    from tracker.analyse.compare import EXIT_FAIL_ON, EXIT_OK
    from tracker.publish.nightly import NightOptions, write_body
    from tracker.publish.units import count

    options = NightOptions(args.confirmed_only, args.attribute, args.allow_cross_versions)
    sections = write_body(results_dir(args), args.commit, args.out, args.machine, options, project_repo(),
                          Path(args.bisections) if args.bisections else None,
                          warn=lambda line: print(line, file=sys.stderr))
    if sections:
        print(f"{count(len(sections), 'comparison')} with a changed best baseline: wrote {args.out}")
    else:
        print(f"no best baseline changed: no {args.out}")
    return EXIT_FAIL_ON if sections and args.fail_on == "best-change" else EXIT_OK
