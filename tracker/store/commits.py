"""Git, read-only: a ref resolved to its commit, and the commit a run is recorded under with its date (asv orders
history by commit date). The PR flow runs its other git commands through `git` too."""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path

from tracker.errors import ToolError
from tracker.store.asvjson import date_problem


class CommitError(ToolError):
    pass


def git(args: list[str], repo_dir: Path, timeout: float = 120) -> str:
    """git's standard output; a CommitError of one line (the command, git's last error line) when it fails."""
    try:
        out = subprocess.run(["git", *args], cwd=repo_dir, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        raise CommitError(f"git {args[0]} failed in {repo_dir}: {e}") from None
    if out.returncode != 0:
        err = out.stderr.strip().splitlines()
        raise CommitError(f"git {' '.join(args)} failed in {repo_dir}: {err[-1] if err else out.returncode}")
    return out.stdout


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        return git(args, cwd, timeout=30).strip()
    except CommitError:
        return None


def resolve_ref(ref: str, repo_dir: Path) -> str:
    """The full hash of the commit `ref` names (a branch, a tag, a hash or a prefix of one)."""
    commit = _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], repo_dir)
    if not commit:
        raise CommitError(f"{ref!r} is not a commit of the repository at {repo_dir}")
    return commit


def resolve(commit: str | None, repo_dir: Path, date_ms: int | None = None) -> tuple[str, int]:
    """(full hash, commit date in ms). Without .git, an explicit hash is recorded with `date_ms` or now."""
    if date_ms is not None and (problem := date_problem(date_ms)):
        raise CommitError(f"--date: {problem}")
    if commit is None:
        commit = _git(["rev-parse", "HEAD"], repo_dir)
        if not commit:
            raise CommitError(f"no git repository at {repo_dir}: pass --commit HASH (and --date) to record under")
    else:
        with contextlib.suppress(CommitError):  # not a commit here (no .git, say): recorded as given
            commit = resolve_ref(commit, repo_dir)
    if date_ms is None:
        stamp = _git(["log", "-1", "--format=%ct", commit], repo_dir)
        date_ms = int(stamp) * 1000 if stamp else int(time.time() * 1000)
    return commit, date_ms
