"""Base and head measured in pairs, round after round, until every cell is decided or the budget is spent.

Round 1 measures every cell of the sides' workloads in three compiles a side at once (`first_compiles`): a look at one
pair a cell decides nothing, since the paired test reads a cell's noise from its own pairs and its class's cells of two
pairs or more, so a round of one compile was always followed by one of three for every cell (H100 trial t10: 163 s, then
193 s). Each later round gives every cell still undecided (tracker.analyse.confirm.pending) more compiles a side, to the
next number of the schedule (5, 8, 10: tracker.analyse.paired.schedule). In every round a cell's base and head compiles
are started together, by two `run`s (one a side, each in its own worktree) that share a GPU and its lock, so that their
timings alternate on the same GPU: a pair never straddles two GPUs or two rounds. On a host of several GPUs the round's
work is split over the GPUs (`Group`: one GPU, and a share of the cores of its own so that the groups' timing cores stay
apart), whole workloads in round 1 (or single presets where there are fewer workloads than GPUs), cells in later rounds,
the most expensive first onto the least loaded GPU, by the GPU-lock seconds the results' cell store recorded of each
cell (in later rounds, this PR's own earlier compiles), else the modes' priors (tracker.runner.costs). Both sides' run
for one GPU is handed CUDA_VISIBLE_DEVICES of that GPU alone, so a base of any version measures where it is put.

Replicate k of a cell at base and replicate k at head are a pair, measured in the same round: the paired record
(tracker.store.pairing) is read off the two cell stores after each round.

Where only kernels under test changed (tracker.flows.baseline), round 1 measures each side's kernels under test declared
in the changed files (tracker.flows.kernelrun), and the baseline (the modes' cells and the untouched kernels') once at
head, unless the nightly's run holds it. The later rounds are the changed kernels' alone: the baseline's cells are
decided ("the same", by construction) and never pending.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO, TypeVar

from tracker.analyse import confirm as confirm_
from tracker.analyse import paired
from tracker.analyse.changes import Comparison
from tracker.flows import roundtime
from tracker.flows.sides import (
    Command,
    Runner,
    Side,
    check_codes,
    kernels_command_line,
    modes_command_line,
    run_command_line,
)
from tracker.publish import units
from tracker.runner import policy
from tracker.runner.costs import Costs
from tracker.runner.plan import CellId
from tracker.store.cells import default_cells_dir
from workloads.kernels.registry import candidate_name
from workloads.modes import MODES

# Round 1 of a kernel-only change: its kernels' cells (a few seconds each, every compile started at once:
# tracker.runner.remaining.waits_for_first) get five compiles a side, since a round of its own costs a side's start
# again (docs/verdicts.md, "A PR that changes only kernels under test").
KERNEL_ONLY_FIRST = 5

Cell = tuple[str, str, str]
Step = tuple[str, Side, list[str]]  # a command of a round: its label, its side (whose worktree), its argv
T = TypeVar("T")


@dataclass(frozen=True)
class Budget:
    """How long a paired measurement may go on: `seconds` of wall time in all (round 1 runs whatever it takes; a later
    round, while time is left, the changes awaiting confirmation and what else it is expected to finish within them:
    `until_decided`), at most `max_compiles` a side per
    cell; `compiles`: exactly that many a side for every cell, whatever the verdicts (an independent measurement of
    the real change, for the power benchmark). The default leaves a PR, its worktrees and comment included, within
    five minutes."""

    seconds: float = policy.PR_BUDGET_S
    max_compiles: int = 10
    compiles: int | None = None

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise ValueError(f"the budget is a positive number of seconds, not {self.seconds:g}")
        if self.compiles is not None and self.compiles < 2:
            raise ValueError(f"a paired measurement makes at least 2 compiles a side, not {self.compiles}")

    @property
    def most(self) -> int:
        return self.compiles or self.max_compiles


@dataclass(frozen=True)
class Group:
    """One GPU of the host and the cores its runs use (None, None: whatever the runs pick, one GPU or none)."""

    gpu: str | None = None
    cpus: frozenset[int] | None = None

    def env(self) -> dict[str, str]:
        return {} if self.gpu is None else {"CUDA_VISIBLE_DEVICES": self.gpu}


def groups_of(devices: Sequence[str], cpus: Sequence[int]) -> list[Group]:
    """One group per GPU, each with a contiguous share of `cpus`; one open group for one GPU or none."""
    if len(devices) < 2:
        return [Group()]
    share = max(1, len(cpus) // len(devices))
    return [Group(d, frozenset(cpus[k * share:(k + 1) * share]) or None) for k, d in enumerate(devices)]


def balance(items: Sequence[T], cost: Callable[[T], float], n: int) -> list[list[T]]:
    """`items` over `n` bins, the most expensive first onto the least loaded bin (LPT); each bin keeps the items'
    order. One bin takes them all without asking their costs (which may read a cell store)."""
    if n == 1:
        return [list(items)]
    bins: list[list[T]] = [[] for _ in range(n)]
    load = [0.0] * n
    for item in sorted(items, key=cost, reverse=True):
        k = min(range(n), key=lambda i: (load[i], i))
        bins[k].append(item)
        load[k] += cost(item)
    order = {id(x): i for i, x in enumerate(items)}
    return [sorted(b, key=lambda x: order[id(x)]) for b in bins]


@dataclass
class PairedRounds:
    """The rounds of one paired measurement (see the module docstring)."""

    sides: Sequence[Side]
    trees: dict[str, Path]
    results: Path
    machine: str
    jobs: int | None
    presets: Sequence[str] | None
    modes: Sequence[str] | None
    runner: Runner
    groups: list[Group]
    log: TextIO = sys.stderr
    # A kernel-only change (tracker.flows.baseline): where its baseline comes from, "head" (its modes measured there
    # in round 1) or "history" (none measured); None: every cell in pairs
    baseline: str | None = None
    first_compiles: int = 3  # the compiles a side round 1 gives the cells it pairs
    kernel_files: Sequence[str] | None = None  # a kernel-only change: its files, whose kernels are paired (None: all)
    name: str = "pr"  # the command its progress lines are said by

    def __post_init__(self) -> None:
        self._records: list[Path] = []  # each baseline run's untouched kernels (tracker.flows.kernelrun)
        self._kernels_at_head: list[Cell] = []  # those `at_head` measured
        self.measured: list[float] = []  # each call's wall time of measuring, in seconds (the time report)
        self._costs: Costs | None = None  # what round 1 expects each cell to cost (`_prior`)

    def first(self) -> None:
        """Round 1: every cell of the sides' workloads, `first_compiles` a side; of a kernel-only change, the changed
        kernels' cells alone, and the baseline at head (as many compiles as `run` gives it by default, as the
        nightly's), unless the history holds it."""
        workloads = list(dict.fromkeys(w for s in self.sides for w in s.workloads))
        n = len(self.groups)
        units: list[tuple[tuple[str, ...], tuple[str, ...] | None]]
        if len(workloads) >= n or len(self.presets or ()) < 2:
            presets = self.presets or policy.default_presets("cuda")  # what `run` measures on a GPU
            units = [(tuple(ws), self.presets and tuple(self.presets)) for ws in
                     balance(workloads, lambda w: self._prior(w, presets), n) if ws]
            placed = list(zip(range(n), units, strict=False))
        else:
            pairs = [(w, p) for w in workloads for p in self.presets or ()]
            placed = [(k, ((w,), (p,))) for k, b in enumerate(balance(pairs, lambda x: self._prior(x[0], (x[1],)), n))
                      for w, p in b]
        self._run([(self.groups[k], self._first_steps(ws, ps)) for k, (ws, ps) in placed])

    def _prior(self, workload: str, presets: Sequence[str]) -> float:
        """A workload's expected GPU-lock seconds in round 1, from what the results' cell store recorded of its cells
        before, else their modes' priors (tracker.runner.costs): the GPUs' shares are balanced by it."""
        if self._costs is None:
            self._costs = Costs.from_store_root(default_cells_dir(self.results))
        cells = [CellId(p, workload, m) for p in presets for m in self.modes or MODES]
        return sum(self._costs.of(c).lock_s + (self.first_compiles - 1) * self._costs.of(c, 2).lock_s for c in cells)

    def _first_steps(self, workloads: Sequence[str], presets: Sequence[str] | None) -> list[Step]:
        if self.baseline is None:
            return [(s.label, s, self._argv(s, workloads, presets, (), self.first_compiles))
                    for s in self._measuring(workloads)]
        steps = [(s.label, s, kernels_command_line(self._argv(s, workloads, presets, (), self.first_compiles),
                                                   self.kernel_files))
                 for s in self._measuring(workloads)]
        head = self.sides[-1]
        if self.baseline == "head" and set(workloads) & set(head.workloads):
            record = self.trees[head.label].parent / f"baseline-kernels-{len(self._records)}.txt"
            self._records.append(record)
            steps.append((f"{head.label} modes", head,
                          kernels_command_line(self._modes_argv(head, workloads, presets), self.kernel_files, record)))
        return steps

    def at_head(self, cells: Sequence[Cell]) -> None:
        """The baseline's `cells` (modes, untouched kernels) measured at head alone: a kernel-only change's
        baseline, where the one planned from the history turned out unusable."""
        head = self.sides[-1]
        kernels = [c for c in cells if candidate_name(c[2]) is not None]
        argv = [*self._modes_argv(head, head.workloads, self.presets, kernels), "--cell",
                *confirm_.cell_names(list(cells))]
        self._run([(self.groups[0], [(f"{head.label} modes", head, argv)])])
        self._kernels_at_head += kernels

    def baseline_kernels(self) -> list[Cell]:
        """The untouched kernels' cells the baseline's runs measured at head (shared like the modes')."""
        listed = [line.split("/") for r in self._records if r.exists()
                  for line in r.read_text(encoding="utf-8").splitlines() if line.count("/") == 2]
        return sorted({*self._kernels_at_head, *((p, w, m) for p, w, m in listed)})

    def _modes_argv(self, side: Side, workloads: Sequence[str], presets: Sequence[str] | None,
                    kernels: Sequence[Cell] = ()) -> list[str]:
        mine = [w for w in workloads if w in side.workloads]
        return modes_command_line(side.commit, mine, self.results, self.machine, presets, self.modes,
                                  sorted({f"{w}:{candidate_name(m)}" for _, w, m in kernels}))

    def costs(self) -> Costs:
        """What each cell's measurements cost, as the results' cell store recorded them (this PR's rounds last)."""
        return Costs.from_store_root(default_cells_dir(self.results))

    def more(self, cells: Sequence[Cell], compiles: int) -> None:
        """A later round: `cells` to `compiles` compiles a side, shared over the GPUs by the GPU-lock seconds a
        further compile of each cell holds, as the rounds before recorded it."""
        costs = self.costs() if len(self.groups) > 1 else Costs()
        bins = balance(list(cells), lambda c: costs.of(CellId(*c), 2).lock_s, len(self.groups))
        work = []
        for group, part in zip(self.groups, bins, strict=True):
            if part:
                names = confirm_.cell_names(list(part))
                work.append((group, [(s.label, s, self._argv(s, s.workloads, self.presets, names, compiles))
                                     for s in self.sides]))
        self._run(work)

    def _measuring(self, workloads: Sequence[str]) -> list[Side]:
        return [s for s in self.sides if set(workloads) & set(s.workloads)]

    def _argv(self, side: Side, workloads: Sequence[str], presets: Sequence[str] | None,
              cells: Sequence[str] = (), compiles: int | None = None) -> list[str]:
        mine = [w for w in workloads if w in side.workloads]
        return run_command_line(side.commit, mine, self.results, self.machine, None, presets, cells, compiles,
                                self.modes)

    def _run(self, work: list[tuple[Group, list[Step]]]) -> None:
        """Each group's commands, both sides at once where the jobs allow (a GPU host), the jobs shared out."""
        count = sum(len(cmds) for _, cmds in work) or 1
        together = self.jobs is not None and self.jobs >= 2
        each = max(1, (self.jobs or 1) // count) if together else self.jobs
        commands = []
        for k, (group, cmds) in enumerate(work):
            env = {**group.env(), policy.ENV_RUNS_PER_GPU: str(len(cmds) if together else 1)}
            for name, side, argv in cmds:
                argv = [*argv, "-j", str(each)] if each else argv
                label = name if len(work) == 1 else f"{name}@{group.gpu or k}"
                commands.append(Command(label, argv, self.trees[side.label], env, group.cpus))
        began = time.monotonic()
        codes = self.runner(commands) if together else [rc for c in commands for rc in self.runner([c])]
        self.measured.append(time.monotonic() - began)
        check_codes(commands, codes)


def until_decided(rounds: PairedRounds, judge: Callable[[], Comparison], budget: Budget, confirm: int = 3,
                  clock: Callable[[], float] = time.monotonic,
                  enough: Callable[[Comparison], bool] | None = None,
                  stopped: Callable[[str, Comparison], Comparison] | None = None) -> Comparison:
    """Round 1, then rounds of the cells still undecided, each to the next number of compiles of the schedule
    (tracker.analyse.paired.schedule), while the budget allows (or, with `budget.compiles`, every cell to that many
    compiles at once), and until `enough` says the caller knows what it needs; the comparison of the last round.
    Round 1 runs whatever the budget; while time is left, a later round measures the changes awaiting confirmation and
    those of the other undecided cells it is expected to finish within the budget (tracker.flows.roundtime.fitting),
    none: the rounds stop. Where the budget stops them with cells they could still decide, `stopped` is told why (in
    words) with the last comparison and gives the one to return: the PR flow keeps the words in the paired record, so
    the comment says them."""
    start = clock()
    rounds.first()
    comparison, last = judge(), clock() - start
    pace = roundtime.RoundTime(rounds.costs())
    pace.learn(roundtime.measured(comparison.cells), last)
    targets = [budget.compiles] if budget.compiles else \
        [t for t in paired.schedule(budget.most, confirm)[1:] if t > rounds.first_compiles]
    for target in targets:
        cells = _all_short(comparison, target) if budget.compiles else confirm_.pending(comparison)
        if not cells or (enough is not None and enough(comparison)):
            break
        spent = clock() - start
        if budget.compiles is not None:
            more = {c: target - n for c, n in roundtime.measured(comparison.cells).items() if c in cells}
        else:
            pace.costs = rounds.costs()
            more = roundtime.fitting(cells, comparison.cells, target, budget.seconds - spent, pace)
            if not more:
                return _stop(rounds, budget, spent, cells, comparison, pace, target, stopped)
        print(f"{rounds.name}: {_told(cells, more)} to decide, measuring to {target} compiles a side "
              f"({spent:.0f} s spent)", file=rounds.log, flush=True)
        began = clock()
        rounds.more(sorted(more), target)
        comparison = judge()
        pace.learn(more, clock() - began)
    return comparison


def _told(cells: Sequence[Cell], measuring: Mapping[Cell, int]) -> str:
    """The cells a round measures, and of how many left to decide where the budget left some out."""
    if len(measuring) == len(cells):
        return units.count(len(cells), "cell")
    return f"{len(measuring)} of {units.count(len(cells), 'cell')} (what the budget has time for)"


def _stop(rounds: PairedRounds, budget: Budget, spent: float, cells: Sequence[Cell], comparison: Comparison,
          pace: roundtime.RoundTime, target: int, stopped: Callable[[str, Comparison], Comparison] | None,
          ) -> Comparison:
    """No undecided cell's next compiles fit in the time left: the rounds stop, saying so and what budget would let
    them all be measured once more."""
    have = roundtime.measured(comparison.cells)
    takes = pace.expected({c: max(1, target - have.get(c, 0)) for c in cells})
    why = (f"budget spent ({spent:.0f} s of {budget.seconds:.0f} s, another round would take about {takes:.0f} s): "
           f"{units.count(len(cells), 'cell')} more rounds could decide measured no further; "
           f"about {enough_for(spent + takes)} s would let one more run")
    print(f"{rounds.name}: {why}", file=rounds.log)
    return stopped(why, comparison) if stopped is not None else comparison


def enough_for(needs_s: float) -> int:
    """A budget, in whole tens of seconds, that would let a round run that ends `needs_s` after the first began: a
    tenth more (roundtime.MARGIN), since the same rounds take longer in another run."""
    return math.ceil(needs_s * roundtime.MARGIN / 10) * 10


def _all_short(c: Comparison, compiles: int) -> list[Cell]:
    """Every cell measured ok on both sides with fewer than `compiles` pairs."""
    return sorted((x.preset, x.workload, x.mode) for x in c.cells
                  if x.compiles is not None and min(x.compiles) < compiles)


__all__ = ["Budget", "Group", "PairedRounds", "balance", "enough_for", "groups_of", "until_decided"]
