"""GitHub as a forge (tracker.flows.forge.Forge): the one PR comment, the Actions job summary, the tracking issue.

Without a token nothing is posted: the body is printed on stdout and the flow succeeds, so forks and laptops run
it as they are.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TextIO

from tracker.errors import ToolError, UsageError
from tracker.github.client import GitHubError, check_pr, from_env, repository
from tracker.github.comment import Outcome, upsert_comment
from tracker.github.tracking import tracking_body, upsert_issue
from tracker.publish.markdown import MAX_BODY_CHARS


class PostError(ToolError):
    pass


@dataclass
class GitHubForge:
    """`owner`/`name` and `pr` to comment on (None: print the comment); the token and API root from `env`."""

    env: Mapping[str, str]
    owner: str | None = None
    name: str | None = None
    pr: int | None = None
    only_on_change: bool = True  # create no comment when nothing changed (an earlier one is always edited)
    out: TextIO = field(default_factory=lambda: sys.stdout)
    body_limit: int = MAX_BODY_CHARS

    @classmethod
    def for_pr(cls, repo: str | None, pr: int | None, env: Mapping[str, str],
               only_on_change: bool = True) -> GitHubForge:
        """The forge of a PR, checked before anything is measured: a repository and a PR number go together, and a
        malformed token fails now, not after the measuring."""
        if repo is None and pr is None:
            return cls(env, only_on_change=only_on_change)
        if repo is None or pr is None:
            raise UsageError("a repository and a PR number go together (or neither, to print the comment)")
        owner, name = repository(repo)
        from_env(env)
        return cls(env, owner, name, check_pr(pr), only_on_change)

    @classmethod
    def for_repo(cls, repo: str, env: Mapping[str, str]) -> GitHubForge:
        """The forge of a repository (its tracking issue), checked as for_pr checks a PR's."""
        owner, name = repository(repo)
        from_env(env)
        return cls(env, owner, name)

    def job_summary(self, body: str) -> None:
        summary = self.env.get("GITHUB_STEP_SUMMARY")
        if summary:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(body + "\n")

    def comment(self, body: str, changed: bool) -> str:
        if self.owner is None or self.name is None:
            self.out.write(body)
            return ""
        try:
            outcome = self.post_comment(body, changed)
        except GitHubError as e:
            raise PostError(f"could not comment on {self.where}: {e}") from None
        if outcome.action == "printed":
            self.out.write(body)
            return f"not posted to {self.where}: GITHUB_TOKEN is not set (the comment body is printed on stdout)"
        if outcome.action == "skipped":
            return f"no comment on {self.where}: nothing changed and there is no earlier comment to update"
        return f"{outcome.action} comment {outcome.comment_id} on {self.where}: {outcome.url}"

    def post_comment(self, body: str, changed: bool) -> Outcome:
        """The PR comment created, updated, skipped (nothing changed, none to update) or, without a token, printed by
        the caller: what happened, for the caller to word. GitHubError when the GitHub API failed."""
        return upsert_comment(from_env(self.env), str(self.owner), str(self.name), int(self.pr or 0), body,
                              self.only_on_change, changed)

    @property
    def where(self) -> str:
        """The PR (OWNER/NAME#N) or the repository, as the lines of outcome name it."""
        return f"{self.owner}/{self.name}" + (f"#{self.pr}" if self.pr is not None else "")

    def tracking_issue(self, title: str, body: str) -> str:
        if self.owner is None or self.name is None:
            raise UsageError("a tracking issue needs the repository (OWNER/NAME)")
        outcome = upsert_issue(from_env(self.env), self.owner, self.name, title, body)
        where = f"{self.owner}/{self.name}"
        if outcome.action == "printed":
            self.out.write(f"# {title}\n\n{tracking_body(body)}\n")
            return f"not posted to {where}: GITHUB_TOKEN is not set (the issue is printed above)"
        note = f" ({outcome.note})" if outcome.note else ""
        return f"{outcome.action} tracking issue #{outcome.number} of {where}: {outcome.url}{note}"


__all__ = ["GitHubForge", "PostError"]
