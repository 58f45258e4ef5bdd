"""`compile-baselines list`: its options and its handler."""

from __future__ import annotations

import argparse

from tracker.commands._options import Commands, command


def add(commands: Commands) -> None:
    command(commands, "list",
            "the workloads (the study's 23 and the plugins'), the modes, the presets and the kernels under test",
            "compile-baselines list")


def main(args: argparse.Namespace) -> int:
    from tracker.publish.listing import list_main

    return list_main()
