"""How long a later round of paired measurement is expected to take, and which undecided cells fit in the time the
budget has left (tracker.flows.rounds.until_decided).

A round is its runs' start and end (ROUND_OVERHEAD_S) around its measurements, whose time follows the GPU lock's work
(docs/runner.md): each further compile of a cell is expected to hold the lock as the cell's last further compile did
(the cell store, tracker.runner.costs), a compile a side, and the measurements to take as many seconds per second of
that work as the round before's did, but no less than its longest cell's compiles one after another (`together` at
once, as the runner starts them on a GPU).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tracker.analyse.changes import CellChange
from tracker.analyse.verdicts import NOISY, UNCONFIRMED
from tracker.runner.costs import Costs
from tracker.runner.plan import CellId

Cell = tuple[str, str, str]  # (preset, workload, mode)

SIDES = 2  # a pair is a compile at base and one at head
# A round's seconds beside its measurements: its runs' start (interpreter, imports, the fork server) before their first
# measurement, their end (results written) after their last, and the comparison after them
ROUND_OVERHEAD_S = 10.0
MARGIN = 1.1  # a round is started only with this much room: the same work takes longer in another round
LEAST_WORK_S = 0.05  # a compile's lock work where its cell's record holds none (a run without a GPU)


@dataclass
class RoundTime:
    """Expected seconds of a round from `costs` (what each cell's further compiles cost), calibrated by `learn`."""

    costs: Costs
    together: int = 2
    rate: float = 1.0  # the last round's seconds of measuring per second of lock work

    def work(self, compiles: Mapping[Cell, int]) -> float:
        """Seconds of GPU-lock work of `compiles` more compiles a side of each cell."""
        return sum(k * SIDES * max(self.costs.of(CellId(*c), 2).lock_s, LEAST_WORK_S) for c, k in compiles.items())

    def measuring(self, compiles: Mapping[Cell, int]) -> float:
        """Seconds the measurements of `compiles` more compiles a side of each cell are expected to take."""
        if not compiles:
            return 0.0
        chain = max(math.ceil(k / max(1, self.together)) * self.costs.of(CellId(*c), 2).wall_s
                    for c, k in compiles.items())
        return max(self.rate * self.work(compiles), chain)

    def expected(self, compiles: Mapping[Cell, int]) -> float:
        """Seconds a round of `compiles` more compiles a side of each cell is expected to take."""
        return ROUND_OVERHEAD_S + self.measuring(compiles) if compiles else 0.0

    def learn(self, compiles: Mapping[Cell, int], took_s: float) -> None:
        """A round of `compiles` took `took_s` seconds: the rounds after it are expected at its measurements' pace."""
        work = self.work(compiles)
        if work > 0 and took_s > ROUND_OVERHEAD_S:
            self.rate = (took_s - ROUND_OVERHEAD_S) / work


def measured(changes: Sequence[CellChange]) -> dict[Cell, int]:
    """Each paired cell's compiles a side so far (the fewer side's)."""
    return {(x.preset, x.workload, x.mode): min(x.compiles) for x in changes if x.compiles}


def fitting(cells: Sequence[Cell], changes: Sequence[CellChange], target: int, left_s: float,
            time: RoundTime) -> dict[Cell, int]:
    """Of `cells`, those a round to `target` compiles a side measures with `left_s` seconds left, with their more
    compiles a side: every change awaiting confirmation while any time is left, whatever the round then takes (round 1
    saw it; its next round is what confirms it or not, and a comment that leaves a real change unconfirmed misses it);
    then a disturbed cell's, then the undecided cells fewest compiles from a decision (their own estimate), each while
    the round's expected time, with MARGIN, stays within what is left."""
    if left_s <= 0:
        return {}
    have = measured(changes)
    verdicts = {(x.preset, x.workload, x.mode): x for x in changes}

    def more(c: Cell) -> int:
        return max(1, target - have.get(c, 0))

    def order(c: Cell) -> tuple[int, float, float, Cell]:
        x = verdicts.get(c)
        estimate = x.more if x is not None and x.more is not None else math.inf
        return (0 if x is not None and x.verdict == NOISY else 1, estimate, time.work({c: 1}), c)

    chosen = {c: more(c) for c in cells if (x := verdicts.get(c)) is not None and x.verdict == UNCONFIRMED}
    for c in sorted(set(cells) - set(chosen), key=order):
        trial = {**chosen, c: more(c)}
        if time.expected(trial) * MARGIN <= left_s:
            chosen = trial
    return chosen


__all__ = ["MARGIN", "ROUND_OVERHEAD_S", "RoundTime", "fitting", "measured"]
