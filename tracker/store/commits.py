"""Git, read-only: a ref resolved to its commit, and the commit a run is recorded under with its date (asv orders
history by commit date); what a user types for a commit (a hash prefix or a git ref) or a date (ms since the epoch
or ISO 8601), read. The PR flow runs its other git commands through `git` too."""

from __future__ import annotations

import contextlib
import datetime as dt
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from tracker.errors import ToolError, UsageError
from tracker.store.asvjson import date_problem


class CommitError(ToolError):
    pass


class UnknownRef(CommitError, UsageError):
    """A commit asked for that is not there: a ref git does not know, or a commit without results (exit 2)."""


def git(args: list[str], repo_dir: Path, timeout: float = 120, stdin: str | None = None) -> str:
    """git's standard output (`stdin` its input); a CommitError of one line (the command, git's last error line)
    when it fails."""
    try:
        out = subprocess.run(["git", *args], cwd=repo_dir, capture_output=True, text=True, timeout=timeout,
                             input=stdin)
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
        raise UnknownRef(not_a_commit(ref, repo_dir))
    return commit


def not_a_commit(ref: str, repo_dir: Path) -> str:
    """How every command says that a ref names no commit (compare, summary, pr, run alike)."""
    return f"{ref!r} is not a commit of the repository at {repo_dir}"


def resolve(commit: str | None, repo_dir: Path, date_ms: int | None = None) -> tuple[str, int]:
    """(full hash, commit date in ms). Without .git, an explicit hash is recorded with `date_ms` or now."""
    if date_ms is not None and (problem := date_problem(date_ms)):
        raise UsageError(problem)
    if commit is None:
        commit = _git(["rev-parse", "HEAD"], repo_dir)
        if not commit:
            raise CommitError(f"{repo_dir} is not a git repository with a commit: commit your work there (git init; "
                              "git add -A; git commit), or pass --commit HASH (and --date) to record under")
    else:
        with contextlib.suppress(CommitError):  # not a commit here (no .git, say): recorded as given
            commit = resolve_ref(commit, repo_dir)
    if date_ms is None:
        stamp = _git(["log", "-1", "--format=%ct", commit], repo_dir)
        date_ms = int(stamp) * 1000 if stamp else int(time.time() * 1000)
    return commit, date_ms


def uncommitted(commit: str, repo_dir: Path) -> list[str]:
    """The tracked files of `repo_dir`'s working tree that differ from `commit` when it is the checked-out one: what
    a run measures but the commit it is recorded under lacks. [] when `commit` is not checked out there or git cannot
    tell; files git does not track are left out (build output, results, a checkout of compile-baselines)."""
    try:
        if git(["rev-parse", "HEAD"], repo_dir, timeout=30).strip() != commit:
            return []
        out = git(["status", "--porcelain", "--untracked-files=no"], repo_dir, timeout=30)
    except CommitError:
        return []
    return [line[3:] for line in out.splitlines() if len(line) > 3]


def match_ref(ref: str, known: Iterable[str], repo_dir: Path | None) -> str:
    """What `ref` names among the `known` commits (those with results): `ref` itself when it is a prefix of one of
    them (an abbreviated hash), else the full hash git resolves it to in `repo_dir` (HEAD~1, a branch, a tag), else
    `ref` unchanged (the caller's lookup then says there are no results for it)."""
    lowered = ref.lower()
    if any(c.lower().startswith(lowered) for c in known) or repo_dir is None:
        return ref
    try:
        return resolve_ref(ref, repo_dir)
    except CommitError:
        return ref


def commit_with_results(ref: str, known: Sequence[str], repo_dir: Path | None, unreadable: bool = False) -> str:
    """`ref` as one of the `known` commits (those with results, oldest first): `ref` itself when it is the start of
    one (an abbreviated hash) or there is no repository to ask, else the commit git resolves it to. UnknownRef when
    git knows no such commit (in not_a_commit's words), or knows it and it has no results; both name the latest
    commits with results. With `unreadable` (some result files could not be read, the ref's run may be in one), a ref
    git does not know is returned as it is, for the lookup to say so."""
    lowered = ref.lower()
    if repo_dir is None or any(c.lower().startswith(lowered) for c in known):
        return ref
    latest = ", ".join(list(dict.fromkeys(c[:8] for c in reversed(known)))[:5]) or "none"
    try:
        commit = resolve_ref(ref, repo_dir)
    except CommitError:
        if unreadable:
            return ref
        raise UnknownRef(f"{not_a_commit(ref, repo_dir)}, nor the start of a commit with results; latest commits "
                         f"with results: {latest}") from None
    if commit not in known:
        raise UnknownRef(f"no results for {ref!r} (commit {commit[:12]}); latest commits with results: {latest}")
    return commit


def parse_date_ms(text: str, end_of_day: bool = False) -> int:
    """A date as ms since the epoch, from ms since the epoch ("1795333830000"), an ISO date ("2026-11-23": its
    start, or with `end_of_day` its last ms) or an ISO time ("2026-11-23T10:00:00Z"; UTC when no offset is given).
    ValueError of one line otherwise."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        if len(text) == 10:  # a bare date
            day = dt.datetime.combine(dt.date.fromisoformat(text), dt.time(), dt.UTC)
            return int(day.timestamp() * 1000) + (86_400_000 - 1 if end_of_day else 0)
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a date: give 2026-11-23, 2026-11-23T10:00:00Z or ms since the epoch"
                         ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)
