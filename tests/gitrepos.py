"""Real git repositories in a temporary directory for the tests of what runs git: a bare `origin` and clones of it,
as actions/checkout leaves them, and a results branch put on `origin` by hand."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

IDENTITY = {"GIT_AUTHOR_NAME": "tester", "GIT_AUTHOR_EMAIL": "tester@example.com",
            "GIT_COMMITTER_NAME": "tester", "GIT_COMMITTER_EMAIL": "tester@example.com"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def commit_all(work: Path, message: str) -> str:
    git(work, "add", "-A")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
    return git(work, "rev-parse", "HEAD")


def origin_and_clone(tmp_path: Path, commits: int = 3, touch: str = "f.txt") -> tuple[Path, Path, list[str]]:
    """A bare `origin` whose main has `commits` commits, each changing `touch`, and a clone of it; the commits,
    oldest first."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(tmp_path, "clone", "-q", str(origin), str(work))
    hashes = []
    for i in range(commits):
        (work / touch).parent.mkdir(parents=True, exist_ok=True)
        (work / touch).write_text(f"{i}\n")
        hashes.append(commit_all(work, f"c{i}"))
    git(work, "push", "-q", "origin", "HEAD:main")
    return origin, work, hashes


def put_on_branch(origin: Path, tmp_path: Path, branch: str, files: dict[str, str]) -> str:
    """Commit `files` (path -> text) as the whole tree of `branch` on `origin`, on its tip when it exists."""
    scratch = tmp_path / f"scratch-{branch}"
    if scratch.exists():
        shutil.rmtree(scratch)
    git(tmp_path, "clone", "-q", str(origin), str(scratch))
    if branch in git(scratch, "ls-remote", "--heads", "origin", branch):
        git(scratch, "checkout", "-q", branch)
    else:
        git(scratch, "checkout", "-q", "--orphan", branch)
        git(scratch, "rm", "-rqf", ".")
    for path, text in files.items():
        (scratch / path).parent.mkdir(parents=True, exist_ok=True)
        (scratch / path).write_text(text)
    tip = commit_all(scratch, "results")
    git(scratch, "push", "-q", "origin", f"HEAD:refs/heads/{branch}")
    return tip
