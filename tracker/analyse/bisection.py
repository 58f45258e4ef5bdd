"""Which commit of a range moved a cell: the bisection's state and its decisions, apart from any measuring.

The range is the first-parent history from a good commit (excluded) to a bad one, as `git bisect --first-parent`
walks it. The first step measures the bad commit against the good one; the cells that changed there (slower or
faster, confirmed) are the change, each with its size r, the log of its ratio. Every later step measures a commit of
the narrowed range against the range's good end (both sides measured in pairs: tracker.analyse.paired) and calls it:

- bad: a cell of the change is at the bad end's level: its 95% interval lies wholly beyond r/2 in the change's
  direction, or, where the interval straddles r/2, the paired test calls it moved in that direction;
- good: every cell is at the good end's level: its interval lies wholly short of r/2, or, where it straddles r/2,
  the paired test calls it the same or moved the other way. A commit is placed by the level it is at, not only by
  "the same within 3%", which a noisy host (a loaded CPU, where a tiny cell moves by 15% between processes) may never
  decide while a change of many times its noise is plain; and a small move the same way as a large change is not it;
- skipped: it cannot be measured (a workload missing there, its run failed, a cell failed), or a cell is at neither
  level: git bisect's `skip`, and the next commit tried is the one nearest the middle beside it.

The first bad commit is the bad end once nothing lies between the two ends; with skipped commits left between
them, it is one of those or the bad end (the narrowed range), as it is when the budget ends the bisection first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tracker.analyse.changes import CellChange
from tracker.analyse.verdicts import FASTER, SAME, SLOWER
from tracker.analyse.versionattribution import Attributed

Cell = tuple[str, str, str]  # (preset, workload, mode)
GOOD, BAD, SKIPPED = "good", "bad", "skipped"
# Why a bisection ended: the first bad commit found; the budget spent; only skipped commits left between the ends;
# nothing changed between good and bad (every cell the same); no cell changed but some stayed undecided.
FOUND, BUDGET, SKIPS, NO_CHANGE, UNCLEAR = "found", "budget", "skips", "no change", "unclear"


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str


@dataclass(frozen=True)
class Probe:
    """One step: `commit` measured against `against` in pairs, what it was called (GOOD, BAD, SKIPPED) and why (a
    skip's reason), the cells' changes, and the step's wall time."""

    commit: str
    against: str
    outcome: str
    why: str = ""
    cells: tuple[CellChange, ...] = ()
    seconds: float = 0.0


@dataclass
class Range:
    """The commits, good first and bad last, and how far the steps have narrowed them: `lo` is the latest known
    good, `hi` the earliest known bad, `skipped` the commits that could not be called, with why."""

    commits: list[Commit]
    lo: int = 0
    hi: int = -1
    skipped: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.commits) < 2:
            raise ValueError("a range is a good commit and at least one after it")
        if self.hi < 0:
            self.hi = len(self.commits) - 1

    def next(self) -> int | None:
        """The commit to measure next: of those between the ends not skipped, the nearest the middle (the earlier of
        two); None when none is left."""
        middle = (self.lo + self.hi) / 2
        left = [i for i in range(self.lo + 1, self.hi) if i not in self.skipped]
        return min(left, key=lambda i: (abs(i - middle), i)) if left else None

    def mark(self, index: int, outcome: str, why: str = "") -> None:
        if not self.lo < index < self.hi:
            raise ValueError(f"commit {index} is not between the ends {self.lo} and {self.hi}")
        if outcome == GOOD:
            self.lo = index
        elif outcome == BAD:
            self.hi = index
        else:
            self.skipped[index] = why

    @property
    def suspects(self) -> list[Commit]:
        """The commits that may be the first bad one: those after the good end, up to the bad end."""
        return self.commits[self.lo + 1:self.hi + 1]

    @property
    def first_bad(self) -> Commit | None:
        return self.commits[self.hi] if self.hi - self.lo == 1 else None

    @property
    def good(self) -> Commit:
        return self.commits[self.lo]

    @property
    def bad(self) -> Commit:
        return self.commits[self.hi]


def key(x: CellChange) -> Cell:
    return (x.preset, x.workload, x.mode)


def change_of(changes: Sequence[CellChange], cells: Sequence[Cell]) -> dict[Cell, float]:
    """The change between good and bad (`changes`: the bad end's cells against the good end's): each of `cells`
    that is slower or faster (confirmed), with the log of its ratio."""
    wanted = set(cells)
    return {key(x): math.log(x.ratio) for x in changes
            if key(x) in wanted and x.verdict in (SLOWER, FASTER) and x.ratio}


def _level(x: CellChange, size: float) -> str | None:
    """Which end's level a cell measured against the good end is at: by its interval against half the change (in
    the change's direction) where that decides, else by the paired verdict; None: neither says."""
    if x.ci is not None and all(x.ci):
        lo, hi = sorted(math.copysign(1.0, size) * math.log(r) for r in x.ci)
        if hi < abs(size) / 2:
            return GOOD
        if lo > abs(size) / 2:
            return BAD
    if x.verdict in (SLOWER, FASTER):
        return BAD if (x.verdict == SLOWER) == (size > 0) else GOOD
    return GOOD if x.verdict == SAME else None


def classify(changes: Sequence[CellChange], change: Mapping[Cell, float]) -> tuple[str, str]:
    """A commit measured (head) against the good end (base), `changes` its cells: BAD when a cell of `change` is at
    the bad end's level, GOOD when every one is at the good end's, else SKIPPED with why."""
    found = {key(x): x for x in changes}
    levels, unclear = [], []
    for cell, size in change.items():
        x = found.get(cell)
        if x is None or x.ratio is None:
            return SKIPPED, f"{'/'.join(cell)} {x.verdict if x is not None else 'not measured'}"
        levels.append(_level(x, size))
        if levels[-1] is None:
            unclear.append(f"{'/'.join(cell)} {x.verdict}, at neither end's level")
    if BAD in levels:
        return BAD, ""
    return (SKIPPED, ", ".join(unclear)) if unclear else (GOOD, "")


def moved_cells(probe: Probe, change: Mapping[Cell, float]) -> list[CellChange]:
    """The cells of a probe at the bad end's level (its evidence), else all of the change's."""
    ours = [x for x in probe.cells if key(x) in change]
    return [x for x in ours if _level(x, change[key(x)]) == BAD] or ours


@dataclass(frozen=True)
class Torch:
    """The torch the ends were measured under where the change was seen (a machine's stored runs), and which change,
    the commit or torch, moved each of its parts there (tracker.analyse.versionattribution)."""

    good: str
    bad: str
    attribution: tuple[Attributed, ...] = ()

    @property
    def changed(self) -> bool:
        return self.good != self.bad


@dataclass
class Bisection:
    """A bisection's record: what it measured, on which machine, its steps, how far it got and why it ended."""

    machine: str
    cells: tuple[Cell, ...]
    range: Range
    probes: list[Probe]
    change: dict[Cell, float]  # the cells that changed between good and bad, each the log of its ratio
    stopped: str
    budget_s: float
    seconds: float
    today: str  # the torch every step measured under
    ends: Torch | None = None  # where the change was seen, when it was read from a machine's runs
    stored: tuple[str, ...] = ()  # the commits whose runs were kept in the results directory

    @property
    def evidence(self) -> Probe | None:
        """The step that called the first bad commit bad: against its parent where one did, else the latest."""
        bad = self.range.first_bad
        if bad is None:
            return None
        found = [p for p in self.probes if p.commit == bad.sha and p.outcome == BAD]
        parent = [p for p in found if p.against == self.range.good.sha]
        return (parent or found or [None])[-1]

    def subject(self, sha: str) -> str:
        return next((c.subject for c in self.range.commits if c.sha == sha), "")


__all__ = ["BAD", "BUDGET", "FOUND", "GOOD", "NO_CHANGE", "SKIPPED", "SKIPS", "UNCLEAR", "Bisection", "Commit",
           "Probe", "Range", "Torch", "change_of", "classify", "key", "moved_cells"]
