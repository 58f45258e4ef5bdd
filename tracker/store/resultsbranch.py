"""asv results kept on a git branch (the nightly's `asv-results`): fetch them, or one machine's or one run's, into a
results directory; store new results on it (merged into its tip, committed, pushed; merged again on the new tip when
another writer pushed first); and find the previous measured run of a machine, on the branch or in a directory.

The branch holds a results directory as asv lays it out: one folder per machine, in which asv names a result file
`<first 8 hex digits of the commit>-<environment>.json` beside the machine's `machine.json`, and `benchmarks.json`
at the top. Runs are found by those names, without reading the files. The previous measured run of a machine before
a commit is the nearest of the commit's first-parent ancestors (the branch's own history, not a merged branch's)
with a result file of that machine, among the SEARCH_DEPTH nearest.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from tracker.errors import ToolError, UsageError
from tracker.store import confined, gitbranch, merge
from tracker.store.asvjson import read_header
from tracker.store.cells import check_machine_name
from tracker.store.commits import git, match_ref, resolve_ref
from tracker.store.gitbranch import Pushed, Remote, Session

SEARCH_DEPTH = 500
_RESULT_NAME = re.compile(r"([0-9a-f]{8})-.+\.json")
_DESCRIPTIONS = ("machine.json", "benchmarks.json")  # kept where the destination has them: they describe its runs


class ResultsBranchError(ToolError):
    pass


def _run_prefix(name: str) -> str | None:
    """The commit prefix of a result file's name, None for any other file."""
    m = _RESULT_NAME.fullmatch(name)
    return m.group(1) if m else None


def _prefixes(paths: Iterable[str], machine: str) -> set[str]:
    """The commit prefixes of `machine`'s runs among result-directory paths (`MACHINE/FILE`)."""
    found = set()
    for p in paths:
        folder, _, name = p.partition("/")
        if folder == machine and (prefix := _run_prefix(name)):
            found.add(prefix)
    return found


def stored_in_dir(results_dir: Path, machine: str) -> set[str]:
    """The commit prefixes of `machine`'s runs in a results directory."""
    found = confined.files(results_dir, f"{glob.escape(machine)}/*.json")
    return _prefixes((f"{machine}/{p.name}" for p in found), machine)


def previous_measured(commit: str, stored: set[str], repo_dir: Path, depth: int = SEARCH_DEPTH) -> str | None:
    """The full hash of the nearest first-parent ancestor of `commit` (itself excluded) whose prefix is `stored`."""
    head = resolve_ref(commit, repo_dir)
    history = git(["rev-list", "--first-parent", f"--max-count={depth + 1}", head, "--"], repo_dir).split()
    return next((c for c in history[1:] if c[:8] in stored), None)


def _stored_on_branch(s: Session, branch: str, machine: str | None) -> tuple[str, list[str]] | None:
    """The branch's tip, fetched, and its paths (those of `machine`'s folder); None without such a branch."""
    tip = gitbranch.fetch_tip(s, branch)
    return None if tip is None else (tip, gitbranch.list_files(s, tip, machine))


def previous_run(machine: str, commit: str, repo_dir: Path, *, results_dir: Path | None = None,
                 remote: Remote | None = None, branch: str | None = None) -> str | None:
    """The previous measured run of `machine` before `commit`: its commit's full hash, or None. The runs are those of
    `results_dir`, else those on `branch` of `remote` (none when the branch does not exist yet)."""
    check_machine_name(machine)
    if results_dir is not None:
        stored = stored_in_dir(results_dir, machine)
    else:
        assert remote is not None and branch is not None
        with gitbranch.session(remote) as s:
            on_branch = _stored_on_branch(s, branch, machine)
        stored = _prefixes(on_branch[1], machine) if on_branch else set()
    return previous_measured(commit, stored, repo_dir) if stored else None


def _run_files(paths: list[str], commit: str, repo_dir: Path, where: str) -> list[str]:
    """The paths of the runs of `commit` (a hash, a prefix or a git ref) among `paths`, with their machine.json."""
    known = {prefix for p in paths if (prefix := _run_prefix(p.rpartition("/")[2]))}
    wanted = match_ref(commit, known, repo_dir).lower()
    hits = {k for k in known if (k == wanted[:8] if len(wanted) >= 8 else k.startswith(wanted))}
    if not hits:
        raise ResultsBranchError(f"no results of commit {commit} {where}")
    if len(hits) > 1:
        raise ResultsBranchError(f"commit {commit} matches the runs of {', '.join(sorted(hits))} {where}: give more "
                                 "digits")
    (prefix,) = hits
    runs = [p for p in paths if _run_prefix(p.rpartition("/")[2]) == prefix]
    folders = {p.rpartition("/")[0] for p in runs}
    return runs + [f"{f}/machine.json" for f in sorted(folders) if f"{f}/machine.json" in paths]


def fetch_results(remote: Remote, branch: str, dest: Path, machine: str | None = None, commit: str | None = None,
                  repo_dir: Path | None = None) -> list[Path] | None:
    """Copy the results on `branch` into `dest`: all of them, `machine`'s, or the runs of `commit` (of `machine`,
    when given) with their machine.json. A machine.json or benchmarks.json that `dest` has is kept (it describes
    the runs there); other files are replaced. The files written, or None when the branch does not exist. Only the
    branch's regular files are fetched: a symlink on it is left out, with a warning (gitbranch.list_files)."""
    gitbranch.check_branch(branch)
    if machine is not None:
        check_machine_name(machine)
    if commit is not None and not commit.strip():  # an unset shell variable: never "whichever run there is"
        raise UsageError("is empty (an unset shell variable?): name the commit whose runs to fetch",
                         parameter="commit")
    with gitbranch.session(remote) as s:
        on_branch = _stored_on_branch(s, branch, machine)
        if on_branch is None:
            return None
        tip, paths = on_branch
        where = f"on {branch}" + (f" for machine {machine}" if machine else "")
        if machine is not None and not paths:
            raise ResultsBranchError(f"no results {where}")
        if commit is not None:
            paths = _run_files(paths, commit, repo_dir or remote.repo, where)
        return gitbranch.export(s, tip, paths, dest, keep=lambda p: p.rpartition("/")[2] in _DESCRIPTIONS)


def _commits_of(sources: list[Path]) -> list[str]:
    """The commits of the runs in the results directories `sources` (ResultsBranchError when there are none)."""
    commits = set()
    for src in sources:
        if not src.is_dir():
            raise ResultsBranchError(f"{src} is not a results directory; nothing was stored")
        for path in confined.files(src, "*/*.json", warn=confined.quiet):  # the merge below warns of what it skips
            if _run_prefix(path.name):
                try:
                    commits.add(read_header(path).commit)
                except (OSError, ValueError) as e:
                    raise ResultsBranchError(f"{path} is not a readable asv result file ({e}); nothing was stored"
                                             ) from None
    if not commits:
        raise ResultsBranchError(f"no asv result files in {', '.join(map(str, sources))}; nothing was stored")
    return sorted(commits)


def store_results(remote: Remote, branch: str, sources: list[Path], note: str | None = None,
                  say: Callable[[str], object] = print, sleep: Callable[[float], object] | None = None
                  ) -> Pushed | None:
    """Merge the results directories `sources` into the tip of `branch` (tracker.store.merge: a measurement wins
    over a failure, mixed machines or versions are refused) and push that as one commit, "Results for COMMITS
    (NOTE)"; merged again on the new tip when another writer pushed first, so no writer loses another's results.
    The branch is started (with no parent) when it does not exist. None when the branch had every result already.
    A branch holding a symlink is refused (gitbranch.commit_and_push): the merge would read and write through it."""
    gitbranch.check_branch(branch)
    message = f"Results for {', '.join(_commits_of(sources))}" + (f" ({note})" if note else "")
    extra = {"sleep": sleep} if sleep is not None else {}
    return gitbranch.commit_and_push(remote, branch, lambda tree: merge.merge_results(sources, tree), message,
                                     say=say, **extra)


__all__ = ["SEARCH_DEPTH", "ResultsBranchError", "fetch_results", "previous_measured",
           "previous_run", "store_results", "stored_in_dir"]
