"""`compile-baselines rm`: drop runs (asv's `asv rm`), selected by commit, machine, torch version and date.

A run is one result file (one commit, machine and environment; torch is a key of the file), so every selector picks
whole files: removing a run deletes its file, never rewrites one. Its cell-store directory goes with it, else the
next `run` of that commit would resume from the old cells instead of measuring again.

Nothing is moved before every path involved is known to be writable. Each run is then removed in an order that a
crash cannot leave half-done in a harmful way: the cell directory is renamed aside (`.rm-<name>-<pid>`, atomic),
the result file is deleted (atomic; if that fails the cells are renamed back), then the renamed directory is
deleted. A process killed between those steps leaves the directory aside; the next `rm` or `run` rolls it back
while the run's result file still exists, and finishes deleting it once the file is gone (`Leftover`). Removals and
that repair hold the results directory's lock, so they never act on each other's directories mid-way.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracker.errors import ToolError, UsageError
from tracker.store import asvfiles, confined
from tracker.store.asvjson import RunFile
from tracker.store.cells import CellStore, RunKey
from tracker.store.commits import match_ref
from tracker.store.results import ResultsError, list_runs, result_files

ASIDE = ".rm-"  # a cell directory being removed: .rm-<its name>-<pid>


class RemoveError(ToolError):
    pass


class SelectionError(UsageError):
    """A selector that is blank or picks no run: a mistake in the command line (exit 2), never "remove all"."""


@dataclass(frozen=True)
class Selection:
    """Which runs to remove: all given selectors must hold (None: any). Dates are ms since the epoch, inclusive,
    compared with the run's date (its commit's date, the one asv orders and plots by)."""

    commit: str | None = None  # a hash prefix of one commit, or a git ref resolved in the repository
    machine: str | None = None
    torch: str | None = None  # a version, or its leading part: 2.11 matches 2.11.0+cu130, not 2.1
    since_ms: int | None = None
    until_ms: int | None = None

    def empty(self) -> bool:
        return all(v is None for v in (self.commit, self.machine, self.torch, self.since_ms, self.until_ms))

    def describe(self) -> str:
        parts = [f"--{k} {v}" for k, v in (("commit", self.commit), ("machine", self.machine),
                                           ("torch", self.torch)) if v is not None]
        parts += [f"--{k} {_day(v)}" for k, v in (("since", self.since_ms), ("until", self.until_ms)) if v is not None]
        return " ".join(parts)


def _day(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _torch_matches(version: str, wanted: str) -> bool:
    return version == wanted or version.startswith((wanted + ".", wanted + "+"))


def select(runs: list[RunFile], sel: Selection, repo_dir: Path | None = None) -> list[RunFile]:
    """The runs `sel` picks, oldest first. SelectionError when it has no selector (removing everything takes
    deleting the directory, not a command with no arguments), when a selector is blank (an unset shell variable),
    when one picks no run on its own, or when they pick none together."""
    if sel.empty():
        raise SelectionError("say which runs to remove: --commit, --machine, --torch, --since or --until")
    for name, value in (("commit", sel.commit), ("machine", sel.machine), ("torch", sel.torch)):
        if value is not None and not value.strip():
            raise SelectionError(f"--{name} is empty (an unset shell variable?): say which runs to remove")
    picks = []
    if sel.commit is not None:
        commit = match_ref(sel.commit, [r.commit for r in runs], repo_dir).lower()
        by_commit = [r for r in runs if r.commit.lower().startswith(commit)]
        matches = sorted({r.commit[:12] for r in by_commit})
        if len(matches) > 1:  # one commit at a time: a short prefix is more likely a slip than a wish
            raise SelectionError(f"--commit {sel.commit} matches several commits ({', '.join(matches)}): "
                                 "give more digits")
        picks.append((f"--commit {sel.commit}", by_commit, "commits", lambda r: r.commit[:12]))
    if sel.machine is not None:
        picks.append((f"--machine {sel.machine}", [r for r in runs if r.machine == sel.machine], "machines",
                      lambda r: r.machine))
    if sel.torch is not None:
        picks.append((f"--torch {sel.torch}", [r for r in runs if _torch_matches(r.torch, sel.torch)], "torch versions",
                      lambda r: r.torch))
    if sel.since_ms is not None:
        picks.append((f"--since {_day(sel.since_ms)}", [r for r in runs if r.date_ms >= sel.since_ms], "latest run",
                      lambda r: _day(r.date_ms)))
    if sel.until_ms is not None:
        picks.append((f"--until {_day(sel.until_ms)}", [r for r in runs if r.date_ms <= sel.until_ms], "oldest run",
                      lambda r: _day(r.date_ms)))
    for what, picked, known, of in picks:
        if not picked:
            values = sorted({of(r) for r in runs})
            there = {"latest run": values[-1:], "oldest run": values[:1]}.get(known, values)
            raise SelectionError(f"{what} matches none of the {len(runs)} runs in the results ({known}: "
                                 f"{', '.join(there) or 'none'})")
    chosen = [r for r in runs if all(r in picked for _, picked, _, _ in picks)]
    if not chosen:
        raise SelectionError(f"no run matches {sel.describe()} together (each matches some of the {len(runs)} runs)")
    return chosen


def cell_dir(cells_root: Path, r: RunFile) -> Path:
    """The cell-store directory of a run (tracker.store.cells)."""
    key = RunKey(r.machine, r.commit, r.torch)
    store = CellStore.of_run(cells_root, key)
    return store.dir if store is not None else cells_root / key.dirname()


def _removable(chosen: list[RunFile], cells_root: Path) -> None:
    """RemoveError naming the first path that removing `chosen` would need to change and cannot (no permission, a
    read-only file system), before anything is moved: a removal that stops half-way would leave a run without its
    cells, or cells without their run."""
    def check(folder: Path, what: str) -> None:
        if not os.access(folder, os.W_OK | os.X_OK):
            raise RemoveError(f"cannot remove {what}: {folder} is not writable (permissions or a read-only file "
                              "system); nothing was removed")

    for r in chosen:
        check(r.path.parent, f"the run {r.machine} {r.commit[:12]}")
        cells = cell_dir(cells_root, r)
        if (why := confined.problem(cells_root, cells)) is not None:  # a removal through it would delete elsewhere
            raise RemoveError(f"cannot remove the cells of {r.machine} {r.commit[:12]}: {why}; nothing was removed")
        if cells.is_dir():
            check(cells.parent, f"the cells of {r.machine} {r.commit[:12]}")
            for folder, _, _ in os.walk(cells):
                check(Path(folder), f"the cells of {r.machine} {r.commit[:12]}")


def remove_run(r: RunFile, cells_root: Path) -> bool:
    """Delete one run: its cell directory (renamed aside first), then its result file; if the file cannot be
    deleted, the cells are renamed back and the error raised. Whether it had cells."""
    cells = cell_dir(cells_root, r)
    aside = cells.with_name(f"{ASIDE}{cells.name}-{os.getpid()}")
    had_cells = cells.is_dir()
    if had_cells:
        os.replace(cells, aside)
    try:
        r.path.unlink(missing_ok=True)
    except BaseException:
        if had_cells:
            os.replace(aside, cells)
        raise
    if had_cells:
        shutil.rmtree(aside)
    _prune(cells, cells_root)
    return had_cells


def _prune(cells: Path, cells_root: Path) -> None:
    """Remove the commit's and the machine's folders of the store once empty (what cannot be removed stays)."""
    for parent in (cells.parent, cells.parent.parent):
        try:
            if parent.is_dir() and parent != cells_root and not any(parent.iterdir()):
                parent.rmdir()
        except OSError:
            return


@dataclass(frozen=True)
class Leftover:
    """A cell directory an interrupted `rm` renamed aside: rolled back while its run's result file exists (and the
    run has no cells since), else deleted, as the interrupted removal would have."""

    aside: Path
    original: Path
    run_exists: bool

    @property
    def rolls_back(self) -> bool:
        return self.run_exists and not self.original.exists()

    def describe(self) -> str:
        if self.rolls_back:
            return f"rolled back an interrupted rm: {self.original} restored (its result file was not removed)"
        return f"finished an interrupted rm: deleted {self.aside}"

    def apply(self) -> str:
        done = self.describe()  # before acting: what it says depends on the directories it changes
        if self.rolls_back:
            os.replace(self.aside, self.original)
        else:
            shutil.rmtree(self.aside)
            _prune(self.original, self.original.parent.parent.parent)
        return done


def leftovers(results_dir: str | os.PathLike[str], cells_root: Path) -> list[Leftover]:
    """The cell directories interrupted removals left aside under `cells_root`. None while a result file cannot be
    read (it may be the run of one: its cells must not be deleted)."""
    found = confined.folders(cells_root, f"*/*/{ASIDE}*")
    if not found:
        return []
    try:
        result_files(results_dir, warn=confined.quiet)  # whether there is any: list_runs below says what it skips
    except ResultsError:
        runs: list[RunFile] = []  # no result file at all: every run set aside was removed
    else:
        runs, unreadable = list_runs(results_dir)
        if unreadable:
            return []
    homes = {cells_root / RunKey(r.machine, r.commit, torch).dirname()
             for r in runs for torch in (r.torch, r.torch.split("+")[0])}
    out = []
    for aside in found:
        original = aside.with_name(aside.name[len(ASIDE):].rpartition("-")[0])
        out.append(Leftover(aside, original, original in homes))
    return out


def finish_interrupted(results_dir: str | os.PathLike[str], cells_root: str | os.PathLike[str]) -> list[str]:
    """Roll back or finish what interrupted removals left (`Leftover`), under the results directory's lock; one line
    each."""
    if not confined.folders(cells_root, f"*/*/{ASIDE}*", warn=confined.quiet):
        return []
    with asvfiles.results_lock(results_dir):
        return [left.apply() for left in leftovers(results_dir, Path(cells_root))]


def _line(r: RunFile) -> str:
    return f"{r.machine}  {r.commit[:12]}  torch {r.torch}  {_day(r.date_ms)}  {r.path}"


Say = Callable[[str], object]


def rm(results_dir: str | os.PathLike[str], cells_dir: str | os.PathLike[str], sel: Selection, yes: bool,
       repo_dir: Path | None = None, *, say: Say, warn: Say) -> None:
    """List the runs `sel` picks, and with `yes` remove them (without: a dry run, nothing is touched), each line
    through `say` as it happens (a run said removed is gone), the unreadable files through `warn`. Raises
    SelectionError when the selection is blank or picks nothing (most often a mistyped selector or an unset
    variable), RemoveError when a path cannot be changed (then nothing was removed). With `yes`, what an interrupted
    `rm` left is rolled back or finished first."""
    root = Path(cells_dir)
    if not yes:
        return _dry_run(results_dir, root, sel, repo_dir, say, warn)
    if not Path(results_dir).is_dir():  # before the lock, which would create it
        result_files(results_dir)
    with asvfiles.results_lock(results_dir):
        repaired = [left.apply() for left in leftovers(results_dir, root)]
        for line in repaired:
            say(line)
        try:
            runs, chosen = _chosen(results_dir, sel, repo_dir, warn)
        except (SelectionError, ResultsError):
            if repaired:  # the run this rm was asked for may be the one the interrupted rm was removing
                return
            raise
        _removable(chosen, root)
        what = f"{len(chosen)} of {len(runs)} run{'s' if len(runs) != 1 else ''}"
        for r in chosen:
            try:
                had_cells = remove_run(r, root)
            except OSError as e:
                raise RemoveError(f"cannot remove {r.path}: {e.strerror or e}; that run and its cells are left as "
                                  "they were") from None
            say(f"removed {_line(r)}" + ("" if had_cells else "  (no cells)"))
    say(f"removed {what}")


def _chosen(results_dir: str | os.PathLike[str], sel: Selection, repo_dir: Path | None, warn: Say
            ) -> tuple[list[RunFile], list[RunFile]]:
    """(every run, the runs `sel` picks), the unreadable files warned about."""
    runs, warnings = list_runs(results_dir)
    for w in warnings:
        warn(f"warning: {w}")
    return runs, select(runs, sel, repo_dir)


def _dry_run(results_dir: str | os.PathLike[str], root: Path, sel: Selection, repo_dir: Path | None, say: Say,
             warn: Say) -> None:
    for left in leftovers(results_dir, root):
        say(f"an interrupted rm left {left.aside}: rm --yes {'rolls it back' if left.rolls_back else 'deletes it'}")
    runs, chosen = _chosen(results_dir, sel, repo_dir, warn)
    what = f"{len(chosen)} of {len(runs)} run{'s' if len(runs) != 1 else ''}"
    say(f"would remove {what} (and their cells under {root}):")
    for r in chosen:
        say(f"  {_line(r)}")
    say("dry run: nothing removed; pass --yes to remove them")


__all__ = ["Leftover", "RemoveError", "Selection", "SelectionError", "cell_dir", "finish_interrupted", "leftovers",
           "remove_run", "rm", "select"]
