"""`compile-baselines issue`: a body file posted as the one tracking issue through GitHub's forge
(tracker.github.forge), and one line of what happened."""

from __future__ import annotations

import argparse
import os

from tracker.commands._options import Commands, command
from tracker.errors import UsageError


def add(commands: Commands) -> None:
    issue = command(commands, "issue", "open or update the one tracking issue (GITHUB_TOKEN, GITHUB_API_URL)",
                    "compile-baselines issue --repo OWNER/NAME --title 'Best baselines' --body-file body.md")
    issue.add_argument("--repo", required=True, help="OWNER/NAME")
    issue.add_argument("--title", required=True, help="the issue's title")
    issue.add_argument("--body-file", required=True, help="markdown file with the body")


def main(args: argparse.Namespace) -> int:
    """Open or update the tracking issue, through the forge; one line of outcome, exit 0 (also when printed)."""
    from tracker.github.forge import GitHubForge
    from tracker.github.upsert import read_body

    forge = GitHubForge.for_repo(args.repo, os.environ)
    if not args.title.strip():
        raise UsageError("must not be empty", parameter="title")
    print(forge.tracking_issue(args.title, read_body(args.body_file, "issue")))
    return 0
