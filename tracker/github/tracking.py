"""`compile-baselines issue`: open or update the one tracking issue of nightly best-baseline changes.

The issue is recognised by a hidden marker in its body, TRACKING_MARKER (added to any body); among the open
issues the oldest carrying it is edited in place (title and body) and any other carrying it is closed, else one is
created (tracker.github.upsert, shared with the PR comment). Closed issues are not searched: closing the issue
acknowledges it, and the next change opens a fresh one. Without a token nothing is posted: the body is printed and
the command succeeds.

The body is the nightly's (nightly.yml's `track` job): one `compare --format md --attribute` per machine whose best
baseline changed, so where the commit and torch both changed since the previous night, a section of each says which
of them moved each best baseline and significant cell (tracker.publish.attributiontext), or the run that decides it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tracker.github.client import GitHubClient
from tracker.github.upsert import OpenIssues, upsert, with_marker
from tracker.publish.markdown import MAX_BODY_CHARS, fit

TRACKING_MARKER = "<!-- compile-baselines:tracking-issue -->"
_CUT = "\n\n… (cut at GitHub's issue size limit: the workflow log has the full comparison)\n"


@dataclass(frozen=True)
class Outcome:
    action: Literal["created", "updated", "printed"]
    number: int | None = None
    url: str | None = None
    note: str = ""


def tracking_body(body: str, max_chars: int = MAX_BODY_CHARS) -> str:
    """The body with the marker first, cut at a line boundary to fit GitHub's limit (the nightly body joins one
    comparison per machine, each of which fits on its own)."""
    return fit(with_marker(body, TRACKING_MARKER), _CUT, max_chars)


def upsert_issue(client: GitHubClient | None, owner: str, repo: str, title: str, body: str) -> Outcome:
    body = tracking_body(body)
    if client is None:
        return Outcome("printed")
    done = upsert(OpenIssues(client, owner, repo, title), TRACKING_MARKER, body)
    assert done.action != "skipped" and done.post is not None  # may_create: never skipped
    closed = ", ".join(f"#{n}" for n in done.removed)
    note = f"closed duplicate tracking issue(s) {closed}" if closed else ""
    return Outcome(done.action, done.post.key, done.post.url, note)
