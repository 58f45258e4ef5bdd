"""`compile-baselines comment`: a body file posted as the one PR comment through GitHub's forge
(tracker.github.forge), and one line of what happened."""

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
    """Post or update the PR comment, through the forge; one line of outcome, exit 0 (also when printed or
    skipped). Whether the best baselines changed is read from the body (the renderer's marker)."""
    from tracker.github.comment import changed_in_body, ensure_marker
    from tracker.github.forge import GitHubForge
    from tracker.github.upsert import read_body

    forge = GitHubForge.for_pr(args.repo, args.pr, os.environ, only_on_change=args.only_on_change)
    body = read_body(args.body_file, "comment")
    outcome = forge.post_comment(body, changed_in_body(body))
    if outcome.action == "printed":
        print(ensure_marker(body))
        print(f"not posted to {forge.where}: GITHUB_TOKEN is not set (the comment body is printed above)")
    elif outcome.action == "skipped":
        print(f"skipped {forge.where}: best baselines unchanged and no earlier comment (--only-on-change)")
    else:
        note = f" ({outcome.note})" if outcome.note else ""
        print(f"{outcome.action} comment {outcome.comment_id} on {forge.where}: {outcome.url}{note}")
    return 0
