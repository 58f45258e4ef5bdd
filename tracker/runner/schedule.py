"""Which measurement starts next, and on which GPU: the runner's loop (tracker.runner.pool) and the simulation of a
run on other hosts (tools/simulate_gpus.py) ask the same `Scheduler`.

Each GPU's lock is what a run waits for (docs/runner.md), so the work is shared out by it:
- the cells go to the GPUs longest first, each to the GPU with the least lock work so far (its expected seconds of
  holding the lock over all its measurements, `tracker.runner.costs`), a cell's compiles all on one GPU;
- each GPU starts its longest cells first (the whole chain: a cell's further compiles follow its first), so the
  run does not end waiting for one long compile while the other GPUs idle; a further compile starts as soon as the
  measurement before it is in;
- the cells that compile nothing (eager, kernels under test) keep the lock busy while the compiles run: a GPU takes
  one whenever fewer than READY_MIN of its measurements are near the lock, at the start (the ramp, before any
  compile is done) and wherever else its lock would idle, the rest at the end;
- a GPU whose queue is empty takes a cell not started yet from the GPU with the most lock work left (the tail);
- a measurement starts on a GPU only while the memory its cost reserves fits beside those in flight there, or
  nothing is in flight there (cells that cannot fit together are kept apart; the memory ledger,
  tracker.runner.memledger, holds it across processes).

`partition` splits cells over GPUs the same way for a caller that runs one process a GPU (the PR flow), `shard` over
hosts by the prior costs alone (every host of a matrix computes the same split).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from tracker.runner.costs import Cost, Costs, expected_cost
from tracker.runner.plan import CellId, Job

READY_MIN = 2  # a GPU's lock has work in sight while this many of its measurements are near it
HORIZON_S = 3.0  # near the lock: compiling nothing, or expected to be done compiling within this many seconds
LIGHT_COMPILE_S = 2.0  # a measurement that compiles for less is a filler (eager, a kernel's JIT)
LOOK_AHEAD = 16  # how far down a queue a measurement that fits in memory is looked for


def shard(cells: list[CellId], index: int, count: int) -> list[CellId]:
    """Shard `index` (1-based) of `count`: greedy longest-first by expected cost, deterministic."""
    if not 1 <= index <= count:
        raise ValueError(f"shard {index}/{count}: i must be between 1 and n")
    loads = [0.0] * count
    owner: dict[CellId, int] = {}
    for cell in sorted(cells, key=lambda c: (-expected_cost(c), c)):
        k = min(range(count), key=lambda j: (loads[j], j))
        loads[k] += expected_cost(cell)
        owner[cell] = k
    return [c for c in cells if owner[c] == index - 1]


def partition(cells: Iterable[CellId], costs: Costs, n: int, compiles: Mapping[CellId, int] | None = None,
              ) -> list[list[CellId]]:
    """The cells in `n` groups of about equal GPU-lock work (longest processing time first: the longest cell to the
    group with the least work), a group a GPU. `compiles`: measurements each cell will make (default 1)."""
    if n < 1:
        raise ValueError(f"partition into {n} groups: n must be at least 1")
    groups: list[list[CellId]] = [[] for _ in range(n)]
    loads = [0.0] * n
    for cell in sorted(cells, key=lambda c: (-_chain(c, costs, (compiles or {}).get(c, 1)).wall_s, c)):
        k = min(range(n), key=lambda j: (loads[j], j))
        loads[k] += _chain(cell, costs, (compiles or {}).get(cell, 1)).lock_s
        groups[k].append(cell)
    return groups


@dataclass(frozen=True)
class _ChainCost:
    wall_s: float  # first to last measurement, one after another
    lock_s: float


def _chain(cell: CellId, costs: Costs, measurements: int, first: int = 1, together: int = 1) -> _ChainCost:
    head, rest = costs.of(cell, first), costs.of(cell, first + 1)
    more = max(0, measurements - 1)
    return _ChainCost(head.wall_s + math.ceil(more / max(1, together)) * rest.wall_s, head.lock_s + more * rest.lock_s)


@dataclass(frozen=True)
class Start:
    """A measurement to start: on which GPU (its position in the run's list; None: a run without GPUs), its
    expected cost, the memory it reserves there, when (the scheduler's clock) and why (the rule that chose it)."""

    job: Job
    gpu: int | None
    cost: Cost
    reserve_bytes: int
    at: float
    why: str


@dataclass
class _Gpu:
    further: deque[Job] = field(default_factory=deque)  # a cell's next compiles, as they are asked for
    compiles: list[Job] = field(default_factory=list)  # first measurements that compile, longest chain first
    light: list[Job] = field(default_factory=list)  # those that compile (almost) nothing, most lock first
    running: dict[Job, Start] = field(default_factory=dict)
    load: float = 0.0  # seconds of lock work assigned and not done
    reserved: int = 0

    def queued(self) -> bool:
        return bool(self.further or self.compiles or self.light)


class Scheduler:
    """The measurements of a run waiting to start, in a queue per GPU (see the module's docstring).

    `jobs`: the measurements to make now (a cell's first, or its next further compile where its first is stored);
    `compiles`: how many measurements each cell will make in all, those to follow included (their cost goes to the
    cell's GPU); `gpus`: how many (0: a run without GPUs, one queue); `workers`: measurements at once; `budget`:
    each GPU's memory for the measurements (None: not known, memory is not counted); `together`: a cell's further
    compiles that may run at once; `alone`: one measurement a GPU at a time, each reserving the whole budget (the
    measurements run again alone). `clock`: seconds, the runner's monotonic clock or a simulation's."""

    def __init__(self, jobs: Iterable[Job], costs: Costs, gpus: int, workers: int, budget: int | None = None,
                 compiles: Mapping[CellId, int] | None = None, together: int = 1, alone: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.costs, self.budget, self.clock, self.together, self.alone = costs, budget, clock, together, alone
        self.has_gpus = gpus > 0
        self.gpus = [_Gpu() for _ in range(max(1, gpus))]
        self.workers = max(1, workers)
        self.cap = 1 if alone else math.ceil(self.workers / len(self.gpus))
        self._home: dict[CellId, int] = {}  # the GPU of each cell's measurements
        self._left: dict[CellId, float] = {}  # each cell's lock work not done yet
        self._place(list(jobs), compiles or {})

    def _place(self, jobs: list[Job], compiles: Mapping[CellId, int]) -> None:
        chains = {j.cell: _chain(j.cell, self.costs, compiles.get(j.cell, 1), j.replicate, self.together)
                  for j in jobs}
        for job in sorted(jobs, key=lambda j: (-chains[j.cell].wall_s, j)):
            if job.cell not in self._home:  # a cell's work counted once, whatever number of its jobs wait now
                self._home[job.cell] = min(range(len(self.gpus)), key=lambda k: (self.gpus[k].load, k))
                self.gpus[self._home[job.cell]].load += chains[job.cell].lock_s
                self._left[job.cell] = chains[job.cell].lock_s
            self._queue(self.gpus[self._home[job.cell]], job)

    def _queue(self, gpu: _Gpu, job: Job) -> None:
        cost = self.costs.of(job.cell, job.replicate)
        if job.replicate > 1:
            gpu.further.append(job)
        elif cost.compile_s >= LIGHT_COMPILE_S:
            gpu.compiles.append(job)  # in _place's order: longest chain first
        else:
            gpu.light.append(job)
            gpu.light.sort(key=lambda j: (-self.costs.of(j.cell).lock_s, j))

    def __bool__(self) -> bool:
        return any(g.queued() for g in self.gpus)

    def holds(self, cell: CellId) -> bool:
        return any(j.cell == cell for g in self.gpus for j in (*g.further, *g.compiles, *g.light))

    def running(self) -> int:
        return sum(len(g.running) for g in self.gpus)

    def add(self, jobs: Iterable[Job]) -> None:
        """A finished measurement's further compiles: next on its cell's GPU (their lock work was counted there when
        the cell was placed)."""
        for job in jobs:
            self.gpus[self._home.setdefault(job.cell, 0)].further.append(job)

    def finished(self, start: Start) -> None:
        gpu = self.gpus[start.gpu or 0]
        gpu.running.pop(start.job, None)
        gpu.reserved -= start.reserve_bytes
        done = min(start.cost.lock_s, self._left.get(start.job.cell, 0.0))
        self._left[start.job.cell] = self._left.get(start.job.cell, 0.0) - done
        gpu.load = max(0.0, gpu.load - done)

    def start(self) -> Start | None:
        """The next measurement to start, or None: none is waiting, every worker is busy, or none fits in memory."""
        if self.running() >= self.workers:
            return None
        now = self.clock()
        free = [k for k, g in enumerate(self.gpus) if len(g.running) < self.cap]
        for k in sorted(free, key=lambda k: (len(self.gpus[k].running), -self.gpus[k].load, k)):
            stolen = not self.gpus[k].queued() and self._steal(k)
            picked = self._pick(k, now)
            if picked is not None:
                job, why = picked
                return self._started(k, job, f"stolen {why}" if stolen else why, now)
        return None

    def _pick(self, k: int, now: float) -> tuple[Job, str] | None:
        gpu = self.gpus[k]
        near = sum(1 for s in gpu.running.values()
                   if s.cost.compile_s < LIGHT_COMPILE_S or s.at + s.cost.init_s + s.cost.compile_s <= now + HORIZON_S)
        fill = near < READY_MIN
        lists = [(gpu.further, "further"), *([(gpu.light, "fill"), (gpu.compiles, "longest")] if fill else
                                            [(gpu.compiles, "longest"), (gpu.light, "light")])]
        for queue, why in lists:
            for i, job in enumerate(list(queue)[:LOOK_AHEAD]):
                if self._fits(gpu, self._reserve(job)):
                    del queue[i]
                    return job, why
        return None

    def _reserve(self, job: Job) -> int:
        if self.alone and self.budget is not None:
            return self.budget
        return self.costs.of(job.cell, job.replicate).reserve_bytes

    def _fits(self, gpu: _Gpu, nbytes: int) -> bool:
        return self.budget is None or not gpu.running or gpu.reserved + nbytes <= self.budget

    def _steal(self, k: int) -> bool:
        """Move to GPU `k` the longest cell not started yet of the GPU with the most lock work left, where that
        lessens the most any GPU has left (the tail: a GPU done with its own cells while another still queues)."""
        thief = self.gpus[k]
        donor = max(self.gpus, key=lambda g: g.load if g.compiles or g.light else -1.0)
        for queue in (donor.compiles, donor.light):
            for i, job in enumerate(queue):
                lock = self._left.get(job.cell, 0.0)
                if donor is not thief and thief.load + lock < donor.load:
                    del queue[i]
                    donor.load -= lock
                    thief.load += lock
                    self._home[job.cell] = k
                    self._queue(thief, job)
                    return True
        return False

    def _started(self, k: int, job: Job, why: str, now: float) -> Start:
        gpu = self.gpus[k]
        start = Start(job, k if self.has_gpus else None, self.costs.of(job.cell, job.replicate), self._reserve(job),
                      now, why)
        gpu.running[job] = start
        gpu.reserved += start.reserve_bytes
        return start
