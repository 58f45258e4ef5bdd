"""Post one PR comment and keep editing it in place.

Our comment is recognised by a hidden marker, MARKER, which `ensure_marker` adds to any body. A later run edits
the comment carrying it instead of adding another; if several carry it (an earlier race), the oldest is edited
and the others are deleted (tracker.github.upsert, shared with the tracking issue).

Whether the best baselines changed is decided by the renderer, which writes a second hidden marker into the body:
`<!-- compile-baselines:changed=true -->` or `<!-- compile-baselines:changed=false -->`. `comment --body-file F`
reads it from there (`changed_in_body`); a body without it counts as changed, so a hand-written body is posted.
With `--only-on-change` and no change, an existing comment is still edited (so it never shows stale numbers; the
renderer's body says nothing changed) but no new comment is created.

Without a token nothing is posted: the body is printed and the command succeeds, so forks and laptops can run it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from tracker.errors import UsageError
from tracker.github.client import GitHubClient
from tracker.github.upsert import PrComments, Upserted, upsert, with_marker
from tracker.publish.markdown import MARKER, MAX_BODY_CHARS

_CHANGED = re.compile(r"<!--\s*compile-baselines:changed=(true|false)\s*-->")

Action = Literal["created", "updated", "skipped", "printed"]


class BodyTooLargeError(UsageError):
    """A body longer than GitHub takes: refused before any request."""


@dataclass(frozen=True)
class Outcome:
    action: Action
    comment_id: int | None = None
    url: str | None = None
    note: str = ""  # e.g. duplicates found or removed


def ensure_marker(body: str) -> str:
    return with_marker(body, MARKER)


def changed_in_body(body: str) -> bool:
    """The renderer's verdict written into the body; absent counts as changed."""
    match = _CHANGED.search(body)
    return match is None or match.group(1) == "true"


def upsert_comment(
    client: GitHubClient | None, owner: str, repo: str, pr: int, body: str, only_on_change: bool, changed: bool
) -> Outcome:
    """Edit our earlier comment on the PR in place, or create it; see the module docstring for the rules."""
    body = ensure_marker(body)
    if len(body) > MAX_BODY_CHARS:
        raise BodyTooLargeError(
            f"comment body has {len(body)} characters, GitHub allows {MAX_BODY_CHARS}: shorten it (the renderer "
            "should have truncated it)"
        )
    if client is None:
        return Outcome("printed")
    done = upsert(PrComments(client, owner, repo, pr), MARKER, body, may_create=changed or not only_on_change)
    if done.action == "skipped" or done.post is None:
        return Outcome("skipped", note="no change and no earlier comment")
    return Outcome(done.action, done.post.key, done.post.url, _note(done))


def _note(done: Upserted) -> str:
    removed = ", ".join(map(str, done.removed))
    if done.found > 1:
        return f"{done.found} comments carry the marker; updated the oldest, removed duplicate(s) {removed}"
    return f"kept the oldest marked comment; removed duplicate(s) {removed}" if done.removed else ""
