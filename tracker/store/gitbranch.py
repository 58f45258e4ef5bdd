"""A branch of files kept beside the code, such as the results branch: read its files at the remote's tip, and
commit a change to them on that tip and push it, again on the new tip when another writer pushed first.

Only git is run (no hosting service's API), in the repository given, against one of its remotes. Nothing is
checked out in the repository itself: files are read and committed through a temporary index and directory, so
its working tree, index and branches are never touched. Every failure is a BranchError of one line.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tracker.errors import ToolError

PUSH_ATTEMPTS = 5
BACKOFF_S = 15.0  # the wait after the n-th refused push is n times this
_LOCATIONS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")


class BranchError(ToolError):
    pass


@dataclass(frozen=True)
class Remote:
    """A remote of the git repository at `repo`. `env` is added to git's environment (credentials, identity)."""

    repo: Path
    name: str = "origin"
    env: Mapping[str, str] = field(default_factory=dict)

    def tracking_ref(self, branch: str) -> str:
        return f"refs/remotes/{self.name}/{branch}"


def _run(remote: Remote, args: list[str], extra_env: Mapping[str, str] | None = None, cwd: Path | None = None,
         stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if k not in _LOCATIONS}  # git runs where it is told here
    env = {**inherited, **remote.env, **(extra_env or {}), "GIT_TERMINAL_PROMPT": "0"}
    try:
        return subprocess.run(["git", *args], cwd=cwd or remote.repo, env=env, input=stdin, capture_output=True,
                              text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
        raise BranchError(f"git {args[0]} failed in {remote.repo}: {e}") from None


def _git(remote: Remote, args: list[str], extra_env: Mapping[str, str] | None = None, cwd: Path | None = None,
         stdin: str | None = None) -> str:
    """git's standard output; BranchError naming the command and git's last error line when it fails."""
    done = _run(remote, args, extra_env, cwd, stdin)
    if done.returncode != 0:
        raise BranchError(f"git {' '.join(args[:3])} failed in {remote.repo}: {_reason(done)}")
    return done.stdout


def _reason(done: subprocess.CompletedProcess[str]) -> str:
    """git's own reason: its first fatal line, else its first error line, else the last line it wrote."""
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip() and not line.startswith("hint:")]
    for mark in ("fatal:", "remote: error:", "error:"):
        if found := [line for line in lines if line.startswith(mark)]:
            return found[0]
    return lines[-1] if lines else f"exit status {done.returncode}"


def fetch_tip(remote: Remote, branch: str, depth: int | None = 1) -> str | None:
    """Fetch `branch`'s tip (and `depth` commits of its history; None: all of it) into the remote's tracking ref;
    the tip's hash, or None when the remote has no such branch."""
    listed = _run(remote, ["ls-remote", "--exit-code", "--heads", remote.name, f"refs/heads/{branch}"])
    if listed.returncode == 2:  # the remote answered, without that branch
        return None
    if listed.returncode != 0:
        raise BranchError(f"cannot read the branches of {remote.name} from {remote.repo}: {_reason(listed)}")
    shallow = [f"--depth={depth}"] if depth else []
    _git(remote, ["fetch", "--no-tags", *shallow, remote.name, f"+refs/heads/{branch}:{remote.tracking_ref(branch)}"])
    return _git(remote, ["rev-parse", "--verify", f"{remote.tracking_ref(branch)}^{{commit}}"]).strip()


def list_files(remote: Remote, ref: str, under: str | None = None) -> list[str]:
    """The paths of the files at `ref`, all of them or those under the folder `under`."""
    where = ["--", under.rstrip("/") + "/"] if under else []
    out = _git(remote, ["ls-tree", "-r", "-z", "--name-only", ref, *where])
    return [p for p in out.split("\0") if p]


def _git_dir(remote: Remote) -> str:
    return _git(remote, ["rev-parse", "--absolute-git-dir"]).strip()


def _tree_env(git_dir: str, index: Path, tree: Path) -> dict[str, str]:
    """git's environment for a private index and working directory beside the repository's own."""
    return {"GIT_DIR": git_dir, "GIT_INDEX_FILE": str(index), "GIT_WORK_TREE": str(tree)}


def _check_out(remote: Remote, git_dir: str, ref: str | None, paths: list[str] | None, tmp: Path) -> Path:
    """`paths` of `ref` (None: every file; a ref of None: none) written under a fresh folder in `tmp`."""
    tree, env = tmp / "tree", _tree_env(git_dir, tmp / "index", tmp / "tree")
    tree.mkdir()
    if ref is not None:
        _git(remote, ["read-tree", ref], env, cwd=tree)
        if paths is None:
            _git(remote, ["checkout-index", "--all", "--force"], env, cwd=tree)
        elif paths:
            _git(remote, ["checkout-index", "--force", "-z", "--stdin"], env, cwd=tree, stdin="\0".join(paths))
    return tree


def export(remote: Remote, ref: str, paths: list[str], dest: Path, keep: Callable[[str], bool] = lambda p: False
           ) -> list[Path]:
    """Write the files `paths` of `ref` into `dest` (their folders made), each one replacing its namesake; the
    paths written. All of them are read out of git before any is put in place, so a failure of git leaves `dest` as
    it was; each file appears whole (a rename). `keep(path)`: leave that file as it is where `dest` has it."""
    dest.mkdir(parents=True, exist_ok=True)
    wanted = [p for p in paths if not (keep(p) and (dest / p).exists())]
    written = []
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=dest) as tmp:  # beside the targets: renames are atomic
        tree = _check_out(remote, _git_dir(remote), ref, wanted, Path(tmp))
        for p in wanted:
            target = dest / p
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(tree / p, target)
            except OSError as e:
                raise BranchError(f"cannot write {target}: {e.strerror or e}") from None
            written.append(target)
    return written


@dataclass(frozen=True)
class Pushed:
    commit: str  # the branch's new tip
    attempts: int  # 1, or more after pushes refused because another writer pushed first


def _commit(remote: Remote, git_dir: str, tmp: Path, tree_dir: Path, parent: str | None, message: str) -> str | None:
    """A commit of the files in `tree_dir` on `parent` (none: the first of the branch); None when they are the
    parent's files exactly."""
    env = _tree_env(git_dir, tmp / "index", tree_dir)
    _git(remote, ["add", "--all", "--force", "."], env, cwd=tree_dir)  # --force: no exclude rule drops a result
    tree = _git(remote, ["write-tree"], env, cwd=tree_dir).strip()
    if parent is not None and tree == _git(remote, ["rev-parse", f"{parent}^{{tree}}"]).strip():
        return None
    if parent is None and not _git(remote, ["ls-tree", tree]).strip():
        return None
    done = _run(remote, ["commit-tree", tree, *(["-p", parent] if parent else []), "-m", message])
    if done.returncode != 0:
        raise BranchError(f"git commit-tree failed in {remote.repo}: {_reason(done)} (set user.name and "
                          "user.email, or GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_COMMITTER_NAME, GIT_COMMITTER_EMAIL)")
    return done.stdout.strip()


def _push(remote: Remote, commit: str, branch: str) -> bool:
    """Push `commit` as `branch`: True when it went in, False when it was refused (the branch moved under us),
    BranchError when git failed otherwise (no connection, no permission)."""
    done = _run(remote, ["push", "--porcelain", remote.name, f"{commit}:refs/heads/{branch}"])
    if done.returncode == 0:
        return True
    if any(line.startswith("!\t") for line in done.stdout.splitlines()):
        return False
    raise BranchError(f"cannot push to {branch} of {remote.name}: {_reason(done)}")


def commit_and_push(remote: Remote, branch: str, change: Callable[[Path], object], message: str,
                    say: Callable[[str], object] = print, sleep: Callable[[float], object] = time.sleep,
                    attempts: int = PUSH_ATTEMPTS) -> Pushed | None:
    """Apply `change` to the files at the remote branch's tip (a folder holding them; an empty one when the branch
    does not exist yet, which then starts with no parent), commit the result on that tip and push it. A push refused
    because the branch moved (another writer pushed first) is answered by doing it all again on the new tip, up to
    `attempts` times, so `change` must give the same result when applied again. None when `change` changed
    nothing."""
    git_dir = _git_dir(remote)
    for attempt in range(1, attempts + 1):
        tip = fetch_tip(remote, branch)
        if tip is None:
            say(f"{remote.name} has no branch {branch} yet: creating it")
        with tempfile.TemporaryDirectory(prefix="compile-baselines-branch-") as tmp:
            tree = _check_out(remote, git_dir, tip, None, Path(tmp))
            change(tree)
            commit = _commit(remote, git_dir, Path(tmp), tree, tip, message)
        if commit is None:
            return None
        if _push(remote, commit, branch):
            return Pushed(commit, attempt)
        if attempt < attempts:
            say(f"push to {branch} refused: it moved (attempt {attempt} of {attempts}); again on the new tip")
            sleep(BACKOFF_S * attempt)
    raise BranchError(f"could not push to {branch} of {remote.name} after {attempts} attempts: other writers kept "
                      "moving it; run again")


__all__ = ["BranchError", "Pushed", "Remote", "commit_and_push", "export", "fetch_tip", "list_files"]
