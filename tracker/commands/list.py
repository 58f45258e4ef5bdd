"""`compile-baselines list`: what can be measured here (tracker.publish.listing), on stdout."""

from __future__ import annotations

import argparse
import sys

from tracker.commands._options import Commands, command


def add(commands: Commands) -> None:
    command(commands, "list",
            "the workloads (the study's and the plugins'), the modes, the presets and the kernels under test",
            "compile-baselines list")


def main(args: argparse.Namespace) -> int:
    from tracker.publish import listing

    sys.stdout.write(listing.render())
    return 0
