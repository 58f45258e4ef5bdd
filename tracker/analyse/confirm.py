"""Confirmation before an alarm: which cells of a comparison to measure again before a change is believed.

One compile in one process is not the truth: two compiles of one cell can choose different kernels and launch
configs, far apart under max-autotune (docs/verdicts.md), and a process can be disturbed. So a change found on one
measurement is a candidate: its cells are measured again in fresh processes, each compiling anew (the PR flow: base
and head, until each side has COMPILES; a nightly: the head, COMPILES more than its run made, against the stored
history), and the comparison is made again with `ChangeRule.confirm`, which leaves a change found on fewer compiles
UNCONFIRMED. Under the fixed bands, a confirmed change has every compile of one side beyond every compile of the
other by more than the band (analyse.judge.judge_bands).
"""

from __future__ import annotations

import math

from tracker.analyse.changes import CellChange, Comparison
from tracker.analyse.compare import code_unchanged, launch_floor
from tracker.analyse.verdicts import FASTER, NOISY, SLOWER, UNCONFIRMED, UNDECIDED

COMPILES = 3  # fresh compiles each side of a candidate change has once confirmed: best, median and spread

Cell = tuple[str, str, str]  # (preset, workload, mode)


def candidates(c: Comparison) -> list[Cell]:
    """The cells whose re-measurement decides the comparison: every cell judged to have moved (too noisy to judge
    included: its next measurements may be quiet) or that moved beyond its minimum change (a change only more
    compiles can show), and the old and new winners of every instance whose best baseline (mode or latency)
    moved; not a compiled cell whose generated code is the same at both runs under the same versions, whose move
    cannot count whatever more compiles show (compare's "code unchanged")."""
    moved = (SLOWER, FASTER, UNCONFIRMED, NOISY)
    launch = launch_floor(c.base, c.head)
    keys = {(x.preset, x.workload, x.mode) for x in c.cells if x.verdict in moved or _beyond_floor(x, c, launch)}
    for i in c.instances:
        if i.best_changed or i.mode_changed or i.latency_verdict in moved:
            keys |= {(i.preset, i.workload, m) for m in (i.base_best, i.head_best) if m}
    return sorted(keys - code_unchanged(c.cells, c.base, c.head))


FUTILE = 2.0  # an undecided cell is given up when settling it would take this many times the most compiles


def pending(c: Comparison) -> list[Cell]:
    """The cells a paired comparison measures in another round (tracker.analyse.paired): every cell not yet decided
    (undecided, a change on fewer pairs than the rule asks, a disturbed measurement) short of the rule's most
    compiles, and the old and new winners of every instance whose best latency is not yet decided; not a cell that
    is futile to chase (`futile`)."""
    open_ = (UNDECIDED, UNCONFIRMED, NOISY)
    short = {(x.preset, x.workload, x.mode) for x in c.cells
             if x.compiles is not None and min(x.compiles) < c.rule.max_compiles}
    keys = {(x.preset, x.workload, x.mode) for x in c.cells if x.verdict in open_}
    for i in c.instances:
        if i.latency_verdict in open_ or (i.mode_changed and i.unconfirmed):
            keys |= {(i.preset, i.workload, m) for m in (i.base_best, i.head_best) if m}
    return sorted(keys & short - {(x.preset, x.workload, x.mode) for x in c.cells if futile(x, c.rule.max_compiles)})


def futile(x: CellChange, max_compiles: int) -> bool:
    """An undecided cell whose own estimate (`more`: the pairs that would decide it at its present change and
    noise, known from two pairs on) is far past the most compiles the rule allows: more rounds would end undecided
    too, so it is left undecided now, with that estimate, and the rounds' time goes to cells they can decide."""
    return x.verdict == UNDECIDED and x.more is not None and x.compiles is not None and \
        min(x.compiles) + x.more > FUTILE * max_compiles


def cell_names(cells: list[Cell]) -> list[str]:
    """`run --cell` arguments: PRESET/WORKLOAD/MODE."""
    return ["/".join(c) for c in cells]


def _beyond_floor(x: CellChange, c: Comparison, launch_us: float) -> bool:
    """Moved beyond the noise test's minimum change; for a cell of unknown noise (judged by the bands), beyond the
    floor and the quarter launch."""
    if x.base_ms is None or x.head_ms is None or x.ratio is None:
        return False
    least = x.threshold if x.ci is not None and x.threshold is not None else \
        max(c.rule.floor, c.rule.jitter_floor(min(x.base_ms, x.head_ms), launch_us))
    return abs(math.log(x.ratio)) > math.log1p(least)
