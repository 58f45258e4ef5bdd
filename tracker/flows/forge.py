"""Where a flow's verdict goes: the forge seam.

A flow (the PR flow, the nightly's tracking step) decides what to say; a `Forge` says it where the code lives: the
one PR comment (created, or edited in place), the job summary of the CI run, the one tracking issue, each within the
forge's body limit. GitHub is one implementation (tracker.github.forge.GitHubForge); `PrintForge` prints (no forge
at hand: a laptop, a fork without a token); `FileForge` keeps what would be posted in a folder, which is what the
tests read and what any other CI system can pick up.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

from tracker.publish.markdown import MAX_BODY_CHARS
from tracker.store import atomic


class Forge(Protocol):
    """What a flow needs of the place its verdicts go."""

    body_limit: int  # the most characters a comment or an issue body may have there

    def job_summary(self, body: str) -> None:
        """Append `body` to the CI job's summary, where the forge has one."""

    def comment(self, body: str, changed: bool) -> str:
        """Post `body` as the one comment of this change (edit the earlier one in place); `changed`: whether the
        verdict found a change (a forge may skip creating a comment when nothing changed). What happened, one line
        ("" to say nothing)."""

    def tracking_issue(self, title: str, body: str) -> str:
        """Open or update the one tracking issue; what happened, one line."""


@dataclass
class PrintForge:
    """No forge: the body is printed on `out` (stdout: `compile-baselines pr ... > comment.md`)."""

    out: TextIO = sys.stdout
    body_limit: int = MAX_BODY_CHARS

    def job_summary(self, body: str) -> None:
        return None

    def comment(self, body: str, changed: bool) -> str:
        self.out.write(body)
        return ""

    def tracking_issue(self, title: str, body: str) -> str:
        self.out.write(f"# {title}\n\n{body}")
        return ""


@dataclass
class FileForge:
    """A forge that is a folder: the comment in `comment.md` (replaced each time, as a comment edited in place),
    the job summary appended to `summary.md`, the tracking issue in `issue.md`."""

    folder: Path
    body_limit: int = MAX_BODY_CHARS

    def job_summary(self, body: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / "summary.md", "a", encoding="utf-8") as f:
            f.write(body + "\n")

    def comment(self, body: str, changed: bool) -> str:
        atomic.write_text(self.folder / "comment.md", body)
        return f"wrote the comment to {self.folder / 'comment.md'}"

    def tracking_issue(self, title: str, body: str) -> str:
        atomic.write_text(self.folder / "issue.md", f"# {title}\n\n{body}")
        return f"wrote the tracking issue to {self.folder / 'issue.md'}"


__all__ = ["FileForge", "Forge", "PrintForge"]
