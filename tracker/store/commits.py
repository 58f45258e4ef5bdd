"""The commit a run is recorded under: a hash and its date (asv orders history by commit date)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tracker.errors import ToolError


class CommitError(ToolError):
    pass


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def resolve(commit: str | None, repo_dir: Path, date_ms: int | None = None) -> tuple[str, int]:
    """(full hash, commit date in ms). Without .git, an explicit hash is recorded with `date_ms` or now."""
    if commit is None:
        commit = _git(["rev-parse", "HEAD"], repo_dir)
        if not commit:
            raise CommitError(f"no git repository at {repo_dir}: pass --commit HASH (and --date) to record under")
    else:
        commit = _git(["rev-parse", "--verify", f"{commit}^{{commit}}"], repo_dir) or commit
    if date_ms is None:
        stamp = _git(["log", "-1", "--format=%ct", commit], repo_dir)
        date_ms = int(stamp) * 1000 if stamp else int(time.time() * 1000)
    return commit, date_ms
