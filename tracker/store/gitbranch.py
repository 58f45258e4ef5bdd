"""A branch of files kept beside the code, such as the results branch: read its files at the remote's tip, and
commit a change to them on that tip and push it, again on the new tip when another writer pushed first.

Only git is run (no hosting service's API), against a remote of the repository given. The repository itself is
never changed: git works in a private bare repository in a temporary folder that reads the repository's
configuration (its remotes, their credentials and URL rewrites, its hooks), so the branch's objects, its tip and its
shallow history go there and vanish with it; files are read out and committed through a private index. Every
failure is a BranchError of one line.

Only the branch's regular files are read or written: a symlink (or a submodule) committed to the branch is never
checked out, so it can make no read or write leave the folder it is in (tracker.store.confined). Readers leave it
out with a warning; a writer refuses the branch, naming it. A branch or remote name git would refuse, or one that
git would take for an option, is refused before git runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tracker.errors import ToolError, UsageError
from tracker.store import atomic, confined

PUSH_ATTEMPTS = 5
BACKOFF_S = 15.0  # the wait after the n-th refused push is n times this
_LOCATIONS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")


class BranchError(ToolError):
    pass


class NameRefused(UsageError):
    """A branch or remote name that git would refuse, or would read as an option (exit 2, nothing fetched)."""


def check_branch(branch: str) -> str:
    """`branch` when git accepts it as a branch name (`git check-ref-format --branch`, which must not expand it
    into another name, as it does @{-1}) and it does not start with '-'; NameRefused otherwise."""
    ok = bool(branch) and not branch.startswith("-")
    if ok:
        try:
            done = subprocess.run(["git", "check-ref-format", "--branch", branch], capture_output=True, text=True,
                                  timeout=60, env={k: v for k, v in os.environ.items() if k not in _LOCATIONS})
        except (OSError, subprocess.SubprocessError) as e:
            raise BranchError(f"git check-ref-format failed: {e}") from None
        ok = done.returncode == 0 and done.stdout.strip() == branch
    if not ok:
        raise NameRefused(f"{branch!r} is not a branch name git accepts (see git check-ref-format; none starts "
                          "with '-')", parameter="branch")
    return branch


def _check_remote(name: str) -> None:
    if not name or name.startswith("-") or any(c.isspace() for c in name):
        raise NameRefused(f"{name!r} is not a git remote's name (it names one of `git remote`'s)",
                          parameter="remote")


@dataclass(frozen=True)
class Remote:
    """A remote of the git repository at `repo`. `env` is added to git's environment (credentials, identity)."""

    repo: Path
    name: str = "origin"
    env: Mapping[str, str] = field(default_factory=dict)


def _reason(done: subprocess.CompletedProcess[str]) -> str:
    """git's own reason: its first fatal line, else its first error line, else the last line it wrote."""
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip() and not line.startswith("hint:")]
    for mark in ("fatal:", "remote: error:", "error:"):
        if found := [line for line in lines if line.startswith(mark)]:
            return found[0]
    return lines[-1] if lines else f"exit status {done.returncode}"


class Session:
    """git in a private bare repository (`tmp`/git) reading `remote.repo`'s configuration."""

    def __init__(self, remote: Remote, tmp: Path) -> None:
        self.remote, self.tmp, self.git_dir = remote, tmp, tmp / "git"

    def run(self, args: list[str], extra_env: Mapping[str, str] | None = None, cwd: Path | None = None,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        inherited = {k: v for k, v in os.environ.items() if k not in _LOCATIONS}  # git runs where it is told here
        env = {**inherited, **self.remote.env, "GIT_DIR": str(self.git_dir), **(extra_env or {}),
               "GIT_TERMINAL_PROMPT": "0"}
        try:  # in the repository's folder: a remote given as a relative path means what it means there
            return subprocess.run(["git", *args], cwd=cwd or self.remote.repo, env=env, input=stdin,
                                  capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as e:
            raise BranchError(f"git {args[0]} failed for {self.remote.repo}: {e}") from None

    def git(self, args: list[str], extra_env: Mapping[str, str] | None = None, cwd: Path | None = None,
            stdin: str | None = None) -> str:
        """git's standard output; BranchError naming the command and git's reason when it fails."""
        done = self.run(args, extra_env, cwd, stdin)
        if done.returncode != 0:
            raise BranchError(f"git {' '.join(args[:3])} failed for {self.remote.repo}: {_reason(done)}")
        return done.stdout

    def tree_env(self, name: str) -> dict[str, str]:
        """git's environment for a private index and working folder `tmp`/`name`."""
        return {"GIT_INDEX_FILE": str(self.tmp / f"{name}.index"), "GIT_WORK_TREE": str(self.tmp / name)}


@contextlib.contextmanager
def session(remote: Remote) -> Iterator[Session]:
    """A Session for `remote`, removed with what it fetched when the block ends."""
    _check_remote(remote.name)
    try:
        common = subprocess.run(["git", "rev-parse", "--git-common-dir"], cwd=remote.repo, capture_output=True,
                                text=True, timeout=60, env={k: v for k, v in os.environ.items() if k not in _LOCATIONS})
    except (OSError, subprocess.SubprocessError) as e:
        raise BranchError(f"git rev-parse failed in {remote.repo}: {e}") from None
    if common.returncode != 0:
        raise BranchError(f"{remote.repo} is not a git repository: {_reason(common)}")
    config = (remote.repo / common.stdout.strip()).resolve() / "config"
    with tempfile.TemporaryDirectory(prefix="compile-baselines-git-") as tmp:
        s = Session(remote, Path(tmp))
        s.git(["init", "--quiet", "--bare", str(s.git_dir)])
        s.git(["config", "--file", str(s.git_dir / "config"), "include.path", str(config)])
        yield s


def fetch_tip(s: Session, branch: str) -> str | None:
    """Fetch `branch`'s tip (its files, not its history); its hash, or None when the remote has no such branch."""
    check_branch(branch)
    name = s.remote.name
    listed = s.run(["ls-remote", "--exit-code", "--heads", name, f"refs/heads/{branch}"])
    if listed.returncode == 2:  # the remote answered, without that branch
        return None
    if listed.returncode != 0:
        raise BranchError(f"cannot read the branches of {name} of {s.remote.repo}: {_reason(listed)}")
    s.git(["fetch", "--quiet", "--no-tags", "--depth=1", name, f"+refs/heads/{branch}:refs/remotes/{name}/{branch}"])
    return s.git(["rev-parse", "--verify", f"refs/remotes/{name}/{branch}^{{commit}}"]).strip()


_REGULAR = ("100644", "100755")  # git's modes of a file; 120000 is a symlink, 160000 a submodule
_KINDS = {"120000": "a symlink", "160000": "a submodule"}


def _entries(s: Session, ref: str, under: str | None) -> list[tuple[str, str]]:
    """(mode, path) of every entry at `ref`, all of them or those under the folder `under`."""
    where = ["--", under.rstrip("/") + "/"] if under else []
    out = s.git(["ls-tree", "-r", "-z", ref, *where])
    entries = []
    for item in filter(None, out.split("\0")):
        meta, _, path = item.partition("\t")
        entries.append((meta.split(" ", 1)[0], path))
    return entries


def not_files(s: Session, ref: str) -> list[str]:
    """What at `ref` is no regular file (a symlink, a submodule), as "PATH (a symlink)"."""
    return [f"{p} ({_KINDS.get(m, 'mode ' + m)})" for m, p in _entries(s, ref, None) if m not in _REGULAR]


def list_files(s: Session, ref: str, under: str | None = None, warn: Callable[[str], object] = confined.warn_stderr
               ) -> list[str]:
    """The paths of the regular files at `ref`, all of them or those under the folder `under`; each symlink or
    submodule is left out, with one warning line."""
    found = []
    for mode, path in _entries(s, ref, under):
        if mode in _REGULAR:
            found.append(path)
        else:
            warn(f"skipped {path} on the branch: {_KINDS.get(mode, 'mode ' + mode)}, which is never followed")
    return found


def _check_out(s: Session, ref: str | None, paths: list[str] | None, name: str, into: Path | None = None) -> Path:
    """`paths` of `ref` (None: every file; a ref of None: none) written under a fresh folder `tmp`/`name`, or under
    the existing folder `into`."""
    env = s.tree_env(name)
    if into is None:
        tree = Path(env["GIT_WORK_TREE"])
        tree.mkdir()
    else:
        tree = into
        env["GIT_WORK_TREE"] = str(tree)
    if ref is not None:
        s.git(["read-tree", ref], env, cwd=tree)
        if paths is None:
            s.git(["checkout-index", "--all", "--force"], env, cwd=tree)
        elif paths:
            s.git(["checkout-index", "--force", "-z", "--stdin"], env, cwd=tree, stdin="\0".join(paths))
    return tree


STAGING = ".fetch-"  # export's folder in its destination, swept by the next export when a killed one left it


def export(s: Session, ref: str, paths: list[str], dest: Path, keep: Callable[[str], bool] = lambda p: False
           ) -> list[Path]:
    """Write the regular files `paths` of `ref` (list_files's) into `dest` (their folders made), each one replacing
    its namesake; the paths written. All of them are read out of git before any is put in place, so a failure of
    git leaves `dest`'s files as they were; each file appears whole (a rename), never through a link in `dest`.
    `keep(path)`: leave that file as it is where `dest` has it. Holds `dest`'s lock (the one its other writers
    hold), under which a staging folder a killed export left is swept first."""
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BranchError(f"cannot write into {dest}: {e.strerror or e}") from None
    written = []
    with atomic.locked(dest, directory=True):
        for left in confined.folders(dest, f"{STAGING}*"):
            shutil.rmtree(left, ignore_errors=True)
        wanted = [p for p in paths if not (keep(p) and (dest / p).is_file())]
        # git writes the files straight into a staging folder beside their targets (renames are atomic), once
        with tempfile.TemporaryDirectory(prefix=STAGING, dir=dest) as staging:
            _check_out(s, ref, wanted, "export", into=Path(staging))
            for p in wanted:  # every file and folder checked before any file moves
                why = confined.problem(staging, Path(staging) / p) or confined.problem(dest, (dest / p).parent)
                if why is not None:
                    raise BranchError(f"cannot write {dest / p}: {why}; nothing was written")
            for p in wanted:
                target = dest / p
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(Path(staging) / p, target)
                except OSError as e:
                    raise BranchError(f"cannot write {target}: {e.strerror or e}") from None
                written.append(target)
    return written


@dataclass(frozen=True)
class Pushed:
    commit: str  # the branch's new tip
    attempts: int  # 1, or more after pushes refused because another writer pushed first


def _commit(s: Session, tree_name: str, parent: str | None, message: str) -> str | None:
    """A commit of the files in the folder `tree_name` on `parent` (none: the first of the branch); None when they
    are the parent's files exactly."""
    env = s.tree_env(tree_name)
    cwd = Path(env["GIT_WORK_TREE"])
    s.git(["add", "--all", "--force", "."], env, cwd=cwd)  # --force: no exclude rule drops a result
    tree = s.git(["write-tree"], env, cwd=cwd).strip()
    if parent is not None and tree == s.git(["rev-parse", f"{parent}^{{tree}}"]).strip():
        return None
    if parent is None and not s.git(["ls-tree", tree]).strip():
        return None
    done = s.run(["commit-tree", tree, *(["-p", parent] if parent else []), "-m", message])
    if done.returncode != 0:
        raise BranchError(f"git commit-tree failed for {s.remote.repo}: {_reason(done)} (set user.name and "
                          "user.email, or GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_COMMITTER_NAME, GIT_COMMITTER_EMAIL)")
    return done.stdout.strip()


def _refusal(done: subprocess.CompletedProcess[str]) -> str | None:
    """git's word for a refused update ("[rejected] (fetch first)", "[remote rejected] (pre-receive hook declined)")
    and the remote's first line about it, or None when the push was not refused (it failed otherwise)."""
    for line in done.stdout.splitlines():
        if line.startswith("!\t"):
            said = line.split("\t")[-1].strip()
            remote = [r.strip() for r in done.stderr.splitlines() if r.startswith("remote:") and r[7:].strip()]
            return said + (f"; {remote[0]}" if remote else "")
    return None


def _push(s: Session, commit: str, branch: str, tip: str | None) -> bool:
    """Push `commit` as `branch`, built on `tip`: True when it went in, False when it was refused because the branch
    moved from `tip` (another writer pushed first). BranchError when the remote refused it without the branch moving
    (a protected branch, a hook's refusal: pushing again would not help) or git failed otherwise (no connection, no
    permission)."""
    done = s.run(["push", "--porcelain", s.remote.name, f"{commit}:refs/heads/{branch}"])
    if done.returncode == 0:
        return True
    refused = _refusal(done)
    if refused is None:
        raise BranchError(f"cannot push to {branch} of {s.remote.name}: {_reason(done)}")
    listed = s.run(["ls-remote", "--heads", s.remote.name, f"refs/heads/{branch}"])
    if listed.returncode != 0:
        raise BranchError(f"{s.remote.name} refused the push to {branch}: {refused}; reading the branch again failed: "
                          f"{_reason(listed)}")
    if (listed.stdout.split() or [None])[0] != tip:
        return False
    raise BranchError(f"{s.remote.name} refused the push to {branch}: {refused}; the branch did not move, so pushing "
                      "again would not help (a protected branch?); nothing was stored")


def _change(change: Callable[[Path], object], tree: Path, branch: str) -> None:
    """`change(tree)`; an error naming a path of the private folder `tree` names it as git does, `BRANCH:PATH`."""
    try:
        change(tree)
    except (ToolError, OSError) as e:
        said = f"{e.strerror}: {e.filename}" if isinstance(e, OSError) and e.strerror and e.filename else str(e)
        if isinstance(e, UsageError) or str(tree) not in said:
            raise
        raise BranchError(said.replace(f"{tree}/", f"{branch}:").replace(str(tree), branch)) from None


def commit_and_push(remote: Remote, branch: str, change: Callable[[Path], object], message: str,
                    say: Callable[[str], object] = print, sleep: Callable[[float], object] = time.sleep,
                    attempts: int = PUSH_ATTEMPTS) -> Pushed | None:
    """Apply `change` to the files at the remote branch's tip (a folder holding them; an empty one when the branch
    does not exist yet, which then starts with no parent), commit the result on that tip and push it. A push refused
    because the branch moved (another writer pushed first) is answered by doing it all again on the new tip, up to
    `attempts` times, so `change` must give the same result when applied again; a push refused while the branch
    stays where it was is a BranchError at once. A branch holding a symlink or a submodule is refused (BranchError)
    before `change` runs: nothing is read or written through it. None when `change` changed nothing."""
    check_branch(branch)
    for attempt in range(1, attempts + 1):
        with session(remote) as s:
            tip = fetch_tip(s, branch)
            if tip is None:
                say(f"{remote.name} has no branch {branch} yet: creating it")
            elif odd := not_files(s, tip):
                more = f" and {len(odd) - 1} more" if len(odd) > 1 else ""
                raise BranchError(f"{branch} of {remote.name} holds {odd[0]}{more}: results are never read or written "
                                  "through one; remove it from the branch; nothing was stored")
            _change(change, _check_out(s, tip, None, "tree"), branch)
            commit = _commit(s, "tree", tip, message)
            if commit is None:
                return None
            if _push(s, commit, branch, tip):
                return Pushed(commit, attempt)
        if attempt < attempts:
            say(f"push to {branch} refused: it moved (attempt {attempt} of {attempts}); again on the new tip")
            sleep(BACKOFF_S * attempt)
    raise BranchError(f"could not push to {branch} of {remote.name} after {attempts} attempts: other writers kept "
                      "moving it; run again")


__all__ = ["BranchError", "NameRefused", "Pushed", "Remote", "Session", "check_branch", "commit_and_push", "export",
           "fetch_tip", "list_files", "not_files", "session"]
