"""`compile-baselines comment`: its options and its handler."""

from __future__ import annotations

import argparse
import os

from tracker.commands._options import Commands, command


def add(commands: Commands) -> None:
    comment = command(
        commands, "comment", "post or update the one PR comment (GITHUB_TOKEN, GITHUB_API_URL)",
        "compile-baselines compare --base main --head HEAD --out comment.md\n"
        "compile-baselines comment --repo OWNER/NAME --pr 42 --body-file comment.md --only-on-change")
    comment.add_argument("--repo", required=True, help="OWNER/NAME")
    comment.add_argument("--pr", required=True, type=int, help="pull request number")
    comment.add_argument("--body-file", required=True, help="markdown file with the body (e.g. compare --out)")
    comment.add_argument("--only-on-change", action="store_true", help="create no comment when nothing changed")


def main(args: argparse.Namespace) -> int:
    from tracker.github.comment import comment_main

    return comment_main(args.repo, args.pr, args.body_file, args.only_on_change, None, os.environ)
