"""`compile-baselines issue`: its options and its handler."""

from __future__ import annotations

import argparse
import os

from tracker.commands._options import Commands, command


def add(commands: Commands) -> None:
    issue = command(commands, "issue", "open or update the one tracking issue (GITHUB_TOKEN, GITHUB_API_URL)",
                    "compile-baselines issue --repo OWNER/NAME --title 'Best baselines' --body-file body.md")
    issue.add_argument("--repo", required=True, help="OWNER/NAME")
    issue.add_argument("--title", required=True, help="the issue's title")
    issue.add_argument("--body-file", required=True, help="markdown file with the body")


def main(args: argparse.Namespace) -> int:
    from tracker.github.tracking import issue_main

    return issue_main(args.repo, args.title, args.body_file, os.environ)
