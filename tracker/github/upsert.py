"""Keep one post on GitHub, found again by a hidden marker in its body: the PR comment and the tracking issue.

A run lists the posts and edits the oldest one carrying the marker in place, removing any other that carries it;
only when none does, it creates one. Two runs (a re-push while the last run posts, a re-run, a POST retried
after a lost response) can both find none and both create one. GitHub has no conditional create, so after
creating, a run lists again and every run converges on the oldest marked post (all agree which): it writes its
body there and removes the others, its own new one included. Removing a post that the other run removed first is
no error. This narrows the race to GitHub's listing lag; the workflows' `concurrency:` groups close it.

Only a post that the tool could have written carries its marker (client.trusted_author: a bot's, or that of someone
with write access): anyone can put the marker into a PR comment or an issue of a public repository.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from tracker.errors import UsageError
from tracker.github.client import Comment, GitHubClient, GitHubError, Issue


@dataclass(frozen=True)
class Post:
    key: int  # a comment's id, an issue's number
    body: str
    url: str
    created_at: str
    trusted: bool = True  # its author could be this tool (client.trusted_author); only such a post is ours


class Posts(Protocol):
    """Where the posts of one kind live, and how one is written or removed."""

    def listed(self) -> list[Post]: ...

    def create(self, body: str) -> Post: ...

    def edit(self, key: int, body: str) -> Post: ...

    def remove(self, key: int) -> None: ...  # one already removed is no error


@dataclass(frozen=True)
class Upserted:
    action: Literal["created", "updated", "skipped"]
    post: Post | None = None  # the one post left carrying the marker, with the body written
    found: int = 0  # posts carrying the marker before this run wrote anything
    removed: tuple[int, ...] = ()  # keys of the duplicates removed, lowest first


def with_marker(body: str, marker: str) -> str:
    return body if marker in body else f"{marker}\n{body}"


def upsert(posts: Posts, marker: str, body: str, may_create: bool = True) -> Upserted:
    """Write `body` (which carries `marker`) into the one marked post, by the rules of the module docstring; with
    `may_create` false and no marked post, write nothing ("skipped")."""
    ours = _marked(posts.listed(), marker)
    if ours:
        kept = posts.edit(ours[0].key, body)
        return Upserted("updated", kept, len(ours), _remove(posts, [p.key for p in ours[1:]]))
    if not may_create:
        return Upserted("skipped")
    created = posts.create(body)
    ours = _marked(posts.listed(), marker)
    if not ours or [p.key for p in ours] == [created.key]:
        return Upserted("created", created)  # no race (an empty list: the listing lags)
    kept = ours[0] if ours[0].key == created.key else posts.edit(ours[0].key, body)
    others = {p.key for p in ours[1:]} | {created.key}
    removed = _remove(posts, sorted(others - {kept.key}))
    return Upserted("created" if kept.key == created.key else "updated", kept, removed=removed)


def _marked(posts: list[Post], marker: str) -> list[Post]:
    """The posts that carry `marker` and may be ours, oldest first: a marker in an outsider's comment or issue
    (anyone can write one) never makes the tool edit that post, nor remove or close its own."""
    return sorted((p for p in posts if p.trusted and marker in p.body), key=lambda p: (p.created_at, p.key))


def _remove(posts: Posts, keys: list[int]) -> tuple[int, ...]:
    for key in keys:
        posts.remove(key)
    return tuple(sorted(keys))


@dataclass(frozen=True)
class PrComments:
    """The comments of one pull request; a duplicate is deleted."""

    client: GitHubClient
    owner: str
    repo: str
    pr: int

    def listed(self) -> list[Post]:
        return [_comment(c) for c in self.client.list_issue_comments(self.owner, self.repo, self.pr)]

    def create(self, body: str) -> Post:
        return _comment(self.client.create_issue_comment(self.owner, self.repo, self.pr, body))

    def edit(self, key: int, body: str) -> Post:
        return _comment(self.client.update_issue_comment(self.owner, self.repo, key, body))

    def remove(self, key: int) -> None:
        try:
            self.client.delete_issue_comment(self.owner, self.repo, key)
        except GitHubError as exc:
            if exc.status != 404:  # 404: the other run deleted it first
                raise


@dataclass(frozen=True)
class OpenIssues:
    """The open issues of a repository (closing the issue acknowledges it: the next post opens a fresh one). An
    edit sets the title too; a duplicate is closed."""

    client: GitHubClient
    owner: str
    repo: str
    title: str

    def listed(self) -> list[Post]:
        return [_issue(i) for i in self.client.list_issues(self.owner, self.repo, state="open")]

    def create(self, body: str) -> Post:
        return _issue(self.client.create_issue(self.owner, self.repo, self.title, body))

    def edit(self, key: int, body: str) -> Post:
        return _issue(self.client.update_issue(self.owner, self.repo, key, title=self.title, body=body))

    def remove(self, key: int) -> None:
        self.client.update_issue(self.owner, self.repo, key, state="closed")


def _comment(c: Comment) -> Post:
    return Post(c.id, c.body, c.html_url, c.created_at, c.trusted)


def _issue(i: Issue) -> Post:
    return Post(i.number, i.body, i.html_url, i.created_at, i.trusted)


def read_body(path: str, what: str) -> str:
    """The text of the body file at `path` (`what`: "comment", "issue"); UsageError when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the {what} body file {path}: {getattr(exc, 'strerror', None) or exc}") from None
