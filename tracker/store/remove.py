"""`compile-baselines rm`: drop runs (asv's `asv rm`), selected by commit, machine, torch version and date.

A run is one result file (one commit, machine and environment; torch is a key of the file), so every selector picks
whole files: removing a run deletes its file, never rewrites one. Its cell-store directory goes with it, else the
next `run` of that commit would resume from the old cells instead of measuring again. Each run is removed in an
order that a crash cannot leave half-done in a harmful way: the cell directory is first renamed aside (atomic), then
the result file is deleted (atomic), then the renamed directory is deleted; a run interrupted before its result
file is gone is still listed, and `rm` again finishes it.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from tracker.errors import ToolError
from tracker.store.asvjson import RunFile
from tracker.store.cells import CellStore, RunKey
from tracker.store.commits import match_ref
from tracker.store.results import list_runs


class RemoveError(ToolError):
    pass


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
    """The runs `sel` picks, oldest first. RemoveError when it has no selector (removing everything takes
    deleting the directory, not a command with no arguments)."""
    if sel.empty():
        raise RemoveError("say which runs to remove: --commit, --machine, --torch, --since or --until")
    chosen = runs
    if sel.commit is not None:
        commit = match_ref(sel.commit, [r.commit for r in runs], repo_dir).lower()
        chosen = [r for r in chosen if r.commit.lower().startswith(commit)]
        matches = sorted({r.commit[:12] for r in chosen})
        if len(matches) > 1:  # one commit at a time: a short prefix is more likely a slip than a wish
            raise RemoveError(f"--commit {sel.commit} matches several commits ({', '.join(matches)}): give more digits")
    if sel.machine is not None:
        chosen = [r for r in chosen if r.machine == sel.machine]
    if sel.torch is not None:
        chosen = [r for r in chosen if _torch_matches(r.torch, sel.torch)]
    if sel.since_ms is not None:
        chosen = [r for r in chosen if r.date_ms >= sel.since_ms]
    if sel.until_ms is not None:
        chosen = [r for r in chosen if r.date_ms <= sel.until_ms]
    return chosen


def cell_dir(cells_root: Path, r: RunFile) -> Path:
    """The cell-store directory of a run (tracker.store.cells)."""
    key = RunKey(r.machine, r.commit, r.torch)
    store = CellStore.of_run(cells_root, key)
    return store.dir if store is not None else cells_root / key.dirname()


def remove_run(r: RunFile, cells_root: Path) -> bool:
    """Delete one run: its cell directory (renamed aside first), then its result file. Whether it had cells."""
    cells = cell_dir(cells_root, r)
    aside = cells.with_name(f".rm-{cells.name}-{os.getpid()}")
    had_cells = cells.is_dir()
    if had_cells:
        os.replace(cells, aside)
    r.path.unlink(missing_ok=True)
    if had_cells:
        shutil.rmtree(aside)
    for parent in (cells.parent, cells.parent.parent):  # the commit's and the machine's folders, once empty
        if parent.is_dir() and parent != cells_root and not any(parent.iterdir()):
            parent.rmdir()
    return had_cells


def _line(r: RunFile) -> str:
    return f"{r.machine}  {r.commit[:12]}  torch {r.torch}  {_day(r.date_ms)}  {r.path}"


def rm_main(results_dir: str | os.PathLike[str], cells_dir: str | os.PathLike[str], sel: Selection, yes: bool,
            repo_dir: Path | None = None) -> int:
    """List the runs `sel` picks, and with `yes` remove them (without: a dry run, nothing is touched). Exit 0;
    RemoveError when nothing matches (most often a mistyped selector)."""
    runs, warnings = list_runs(results_dir)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    chosen = select(runs, sel, repo_dir)
    if not chosen:
        machines = ", ".join(sorted({r.machine for r in runs}))
        raise RemoveError(f"no run matches {sel.describe()} ({len(runs)} runs in {results_dir}, machines: {machines})")
    root = Path(cells_dir)
    what = f"{len(chosen)} of {len(runs)} run{'s' if len(runs) != 1 else ''}"
    if not yes:
        print(f"would remove {what} (and their cells under {root}):")
        for r in chosen:
            print(f"  {_line(r)}")
        print("dry run: nothing removed; pass --yes to remove them")
        return 0
    for r in chosen:
        had_cells = remove_run(r, root)
        print(f"removed {_line(r)}" + ("" if had_cells else "  (no cells)"))
    print(f"removed {what}")
    return 0


__all__ = ["RemoveError", "Selection", "cell_dir", "remove_run", "rm_main", "select"]
