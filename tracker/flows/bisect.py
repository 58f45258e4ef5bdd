"""`compile-baselines bisect`: which commit of a range moved the cells named (or an instance's best baseline).

The range is the first-parent history from the good commit to the bad one (tracker.analyse.bisection has the state
and its decisions). Each step is a paired measurement as the PR flow makes it (tracker.flows.rounds: both commits in
worktrees of their own, measured in pairs round after round until each cell is decided), of the named cells only: the
first step the bad end against the good one (which cells changed, and which way), each later one the commit nearest
the middle of the narrowed range against its good end, so about log2(commits) steps, and one more against the first
bad commit's parent where no step measured it there, for the evidence. A step measures in a scratch folder of its own,
so each of its pairs is measured together, never against an earlier step's compiles; the runs of the commits it
measured after the good end are then merged into the results directory, under a machine of their own (`MACHINE-bisect`
by default: a few cells at a commit the nightly never measured must not read as a night of that machine's history).

With `from_machine` (the nightly), the change is the one that machine's stored runs of good and bad show: the
instances whose best baseline changed are bisected (their winners at either end, and the cells that moved), and where
torch changed between the two runs as well, the bisection says that it is of the commits under today's torch and
gives the stored runs' attribution (tracker.analyse.versionattribution).
"""

from __future__ import annotations

import glob
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tracker.analyse import compare, versionattribution
from tracker.analyse.bisection import (
    BAD,
    BUDGET,
    FOUND,
    GOOD,
    NO_CHANGE,
    SKIPPED,
    SKIPS,
    UNCLEAR,
    Bisection,
    Cell,
    Commit,
    Probe,
    Range,
    Torch,
    change_of,
    classify,
    key,
)
from tracker.analyse.changes import Comparison
from tracker.analyse.compare import ChangeRule
from tracker.analyse.confirm import COMPILES
from tracker.analyse.paired import recorded, rule_for
from tracker.analyse.verdicts import SAME
from tracker.errors import UsageError
from tracker.flows import rounds
from tracker.flows.sides import Command, FlowError, Runner, Side, resolve, run_commands, workloads_at, worktrees
from tracker.paths import REPO_ROOT
from tracker.runner import gpus
from tracker.runner.workerenv import usable_cpus
from tracker.store import confined, merge, pairing
from tracker.store.cells import CellStore, RunKey, check_machine_name, default_cells_dir, torch_version
from tracker.store.commits import git
from tracker.store.resultsbranch import stored_in_dir
from workloads import catalog
from workloads.kernels.registry import MODE_PREFIX
from workloads.names import MODES, is_plugin_workload


@dataclass(frozen=True)
class BisectRequest:
    """What `bisect` is asked: the two ends, what to bisect, where the runs go, how to measure and how long."""

    good_ref: str
    bad_ref: str
    cells: Sequence[str] = ()  # PRESET/WORKLOAD/MODE
    instances: Sequence[str] = ()  # PRESET/WORKLOAD: its best baseline (its winners at the ends, else every mode)
    results_dir: Path = Path(".asv/results")
    machine: str | None = None  # what its runs are recorded as; None: FROM_MACHINE-bisect, else HOSTNAME-bisect
    from_machine: str | None = None  # whose stored runs of good and bad show the change
    confirmed_only: bool = False  # of those runs' changes, only the ones measured again at bad (compare --confirm)
    history: Sequence[str | os.PathLike[str]] = ()
    jobs: int | None = None
    budget: rounds.Budget = field(default_factory=lambda: rounds.Budget(seconds=900.0))
    out: Path | None = None  # the markdown section (the tracking issue's), written when there was a change to bisect
    repo_dir: Path = REPO_ROOT


@dataclass(frozen=True)
class Bisected:
    """What a bisection found: its ends, resolved, and the steps that found the first bad commit (None: nothing to
    bisect, no best baseline changed between the ends on `from_machine`)."""

    good: str
    bad: str
    bisection: Bisection | None


def bisect(request: BisectRequest, runner: Runner | None = None, devices: Sequence[str] | None = None,
           clock: Callable[[], float] = time.monotonic, log: TextIO | None = None) -> Bisected:
    """The commit between good and bad that moved the cells, found by paired rounds at midpoints of the range;
    `log`: where it says what it measures (None: stderr). Errors raise (typed: tracker.errors)."""
    if not (request.cells or request.instances or request.from_machine):
        raise UsageError("name what to bisect: cells (PRESET/WORKLOAD/MODE), instances (PRESET/WORKLOAD), or the "
                         "machine whose runs of good and bad show the change", parameter="cell")
    for text in request.cells:
        parse_cell(text)  # a mistake of the command line said before any git or measuring
    for text in request.instances:
        parse_instance(text)
    repo_dir, results = Path(request.repo_dir).resolve(), Path(request.results_dir).resolve()
    good, bad = resolve(request.good_ref, repo_dir), resolve(request.bad_ref, repo_dir)
    commits = first_parents(good, bad, repo_dir)
    seen, ends = _seen(request, results, good, bad, repo_dir) if request.from_machine else (None, None)
    cells = cells_to_bisect(request.cells, request.instances, seen)
    if not cells:
        return Bisected(good, bad, None)
    for commit, end in ((good, "good"), (bad, "bad")):
        if missing := missing_workloads(commit, cells, repo_dir):
            raise UsageError(f"{missing} at the {end} end ({commit[:12]}): it cannot be bisected there")
    machine = request.machine or f"{request.from_machine or socket.gethostname()}-bisect"
    check_machine_name(machine)
    devices = gpus.listed() if devices is None else devices
    log = log or sys.stderr
    print(f"bisect: {len(commits) - 1} commits from {good[:12]} ({request.good_ref}) to {bad[:12]} "
          f"({request.bad_ref}), {', '.join('/'.join(c) for c in cells)}, as machine {machine}", file=log)
    with tempfile.TemporaryDirectory(prefix="compile-baselines-bisect-") as work:
        bisector = Bisector(repo_dir, results, machine, Path(work), request.budget, request.jobs, request.history,
                            runner or run_commands, rounds.groups_of(devices, usable_cpus()), clock, log)
        return Bisected(good, bad, bisector.bisect(commits, cells, ends))


def first_parents(good: str, bad: str, repo_dir: Path) -> list[Commit]:
    """The good commit, then the first-parent history after it up to the bad one, oldest first, with subjects."""
    if good == bad:
        raise UsageError(f"good and bad are one commit ({good[:12]}): nothing lies between them")
    if not _is_ancestor(good, bad, repo_dir):
        raise UsageError(f"good ({good[:12]}) is not an ancestor of bad ({bad[:12]}): name a good commit of bad's "
                         "history")
    lines = git(["log", "--first-parent", "--format=%H %s", f"{good}..{bad}", "--"], repo_dir).splitlines()
    subject = git(["log", "-1", "--format=%s", good, "--"], repo_dir).strip()
    later = [line.partition(" ") for line in reversed(lines)]
    return [Commit(good, subject), *(Commit(sha, text) for sha, _, text in later)]


def _is_ancestor(good: str, bad: str, repo_dir: Path) -> bool:
    return git(["merge-base", good, bad], repo_dir).strip() == good


def cells_to_bisect(cells: Sequence[str], instances: Sequence[str], seen: Comparison | None) -> tuple[Cell, ...]:
    """The cells named; each instance's winners at either end and its cells that moved where the stored runs show
    them, else its every mode; with neither named, the instances whose best baseline changed in the stored runs."""
    out = [parse_cell(c) for c in cells]
    pairs = [parse_instance(i) for i in instances]
    if seen is not None and not cells and not instances:
        pairs = [(i.preset, i.workload) for i in seen.best_changes]
    for preset, workload in pairs:
        modes: set[str] = set()
        if seen is not None:
            for i in seen.instances:
                if (i.preset, i.workload) == (preset, workload):
                    modes |= {m for m in (i.base_best, i.head_best) if m}
            modes |= {x.mode for x in seen.cells if (x.preset, x.workload) == (preset, workload) and x.significant}
        out += [(preset, workload, m) for m in MODES if m in modes or not modes & set(MODES)]
    return tuple(dict.fromkeys(out))


def parse_cell(text: str) -> Cell:
    parts = text.split("/")
    if len(parts) != 3 or not parts[2]:
        raise UsageError(f"{text!r} is not a cell: PRESET/WORKLOAD/MODE, e.g. prefill/llm_rmsnorm/default",
                         parameter="cell")
    preset, workload = parse_instance("/".join(parts[:2]), "cell")
    if parts[2] not in MODES and not parts[2].startswith(MODE_PREFIX):
        raise UsageError(f"{text!r}: {parts[2]!r} is not a mode ({', '.join(MODES)}) or {MODE_PREFIX}NAME",
                         parameter="cell")
    return preset, workload, parts[2]


def parse_instance(text: str, parameter: str = "instance") -> tuple[str, str]:
    parts = text.split("/")
    if len(parts) != 2:
        raise UsageError(f"{text!r} is not an instance: PRESET/WORKLOAD, e.g. prefill/llm_rmsnorm",
                         parameter=parameter)
    preset, workload = catalog.check_preset(parts[0]), catalog.check_workload(parts[1])
    if not catalog.applies(preset, workload):
        raise UsageError(f"{text!r}: {workload} is not measured in {preset}", parameter=parameter)
    return preset, workload


def missing_workloads(commit: str, cells: Sequence[Cell], repo_dir: Path) -> str:
    """Which of the cells' workloads `commit` does not define ("" when it has them, or its list cannot be read)."""
    there = workloads_at(commit, repo_dir)
    missing = sorted({c[1] for c in cells if there is not None and not is_plugin_workload(c[1]) and c[1] not in there})
    if not missing:
        return ""
    return f"{', '.join(missing)} {'is not a workload' if len(missing) == 1 else 'are not workloads'}"


def _seen(request: BisectRequest, results: Path, good: str, bad: str,
          repo_dir: Path) -> tuple[Comparison, Torch]:
    """The change as the stored runs of `from_machine` show it (as `track` compares them), and the torch of each end
    with the attribution of what moved when torch changed too."""
    rule = ChangeRule(confirm=(0, COMPILES) if request.confirmed_only else (0, 0))
    seen = compare.compare_runs(results, good, bad, request.from_machine, allow_cross_versions=True, rule=rule,
                                repo_dir=repo_dir, history=request.history)
    attribution = versionattribution.attribute(results, seen, repo_dir)
    return seen, Torch(seen.base.torch, seen.head.torch, tuple(attribution.items) if attribution else ())


@dataclass
class _CellRounds(rounds.PairedRounds):
    """The paired rounds of the named cells only: round 1 gives each of them `first_compiles` a side."""

    cells: Sequence[Cell] = ()

    def first(self) -> None:
        self.more(list(self.cells), self.first_compiles)


@dataclass
class Bisector:
    """The steps of one bisection (see the module docstring); `work`: the scratch folder of its steps."""

    repo_dir: Path
    results: Path
    machine: str
    work: Path
    budget: rounds.Budget
    jobs: int | None
    history: Sequence[str | os.PathLike[str]]
    runner: Runner
    groups: list[rounds.Group]
    clock: Callable[[], float] = time.monotonic
    log: TextIO = sys.stderr
    stored: list[str] = field(default_factory=list)

    def bisect(self, commits: list[Commit], cells: Sequence[Cell], ends: Torch | None) -> Bisection:
        start, state = self.clock(), Range(commits)
        first = self.probe(0, state.good.sha, state.bad.sha, cells, {})
        if first.outcome == SKIPPED and not first.cells:
            raise FlowError(f"the bad end ({state.bad.sha[:12]}) cannot be measured: {first.why}")
        probes, change = [first], change_of(first.cells, cells)
        if not change:
            stopped = NO_CHANGE if all(x.verdict == SAME for x in first.cells) else UNCLEAR
        else:
            stopped = self.narrow(state, change, probes, start)
            if stopped == FOUND:
                self.neighbours(state, change, probes, start)
        return Bisection(self.machine, tuple(cells), state, probes, change, stopped, self.budget.seconds,
                         self.clock() - start, torch_version(), ends, tuple(self.stored))

    def narrow(self, state: Range, change: dict[Cell, float], probes: list[Probe], start: float) -> str:
        """Steps until the first bad commit is found, only skipped commits are left between the ends, or the time
        left is less than a step has taken."""
        while (i := state.next()) is not None:
            commit = state.commits[i]
            if missing := missing_workloads(commit.sha, list(change), self.repo_dir):
                print(f"bisect: skipping {commit.sha[:12]}: {missing} there", file=self.log)
                state.mark(i, SKIPPED, f"{missing} there")
                continue
            left = self.budget.seconds - (self.clock() - start)
            if left < min(p.seconds for p in probes):
                print(f"bisect: budget spent ({self.budget.seconds - left:.0f} s of {self.budget.seconds:.0f} s, a "
                      f"step takes {min(p.seconds for p in probes):.0f} s or more)", file=self.log)
                return BUDGET
            print(f"bisect: step {len(probes) + 1}: {commit.sha[:12]} against {state.good.sha[:12]} "
                  f"({len(state.suspects)} suspects left)", file=self.log, flush=True)
            probe = self.probe(len(probes), state.good.sha, commit.sha, list(change), change, left)
            probes.append(probe)
            state.mark(i, probe.outcome, probe.why)
        return FOUND if state.first_bad is not None else SKIPS

    def neighbours(self, state: Range, change: dict[Cell, float], probes: list[Probe], start: float) -> None:
        """The first bad commit against its parent, where no step measured it there and the budget allows: the
        evidence in the PR comment's terms."""
        bad = state.bad.sha
        if any(p.commit == bad and p.against == state.good.sha for p in probes):
            return
        left = self.budget.seconds - (self.clock() - start)
        if left < min(p.seconds for p in probes):
            return
        print(f"bisect: {bad[:12]} against its parent, for the evidence", file=self.log, flush=True)
        probes.append(self.probe(len(probes), state.good.sha, bad, list(change), change, left))

    def probe(self, k: int, base: str, head: str, cells: Sequence[Cell], change: dict[Cell, float],
              seconds: float | None = None) -> Probe:
        """Step `k`: `head` against `base` in pairs, called against `change` (none: the first step)."""
        began = self.clock()
        measured = self.measure(k, base, head, cells, self.budget.seconds if seconds is None else seconds, change)
        if isinstance(measured, str):
            return Probe(head, base, SKIPPED, measured, (), self.clock() - began)
        found = tuple(x for x in measured.cells if key(x) in set(cells))
        if change:
            outcome, why = classify(found, change)
        else:
            moved = change_of(found, cells)
            outcome = BAD if moved else GOOD if all(x.verdict == SAME for x in found) else SKIPPED
            why = ", ".join(f"{'/'.join(key(x))} {x.verdict}" for x in found if x.verdict != SAME)
        self.keep(k, head)
        return Probe(head, base, outcome, why, found, self.clock() - began)

    def measure(self, k: int, base: str, head: str, cells: Sequence[Cell], seconds: float,
                change: dict[Cell, float]) -> Comparison | str:
        """The two commits measured in pairs, in step `k`'s scratch folder, until decided, `head` placed at either
        end's level of `change`, or `seconds` spent: their comparison, or why `head` could not be measured."""
        scratch = self.work / f"step-{k}" / "results"
        workloads = tuple(dict.fromkeys(c[1] for c in cells))
        sides = [Side(base[:8], base, workloads), Side(head[:8], head, workloads)]
        rule = rule_for(self.budget.most, COMPILES)
        failed: dict[str, int] = {}

        def watched(commands: Sequence[Command]) -> list[int]:
            codes = self.runner(commands)
            failed.update({c.label.split("@")[0]: rc for c, rc in zip(commands, codes, strict=True) if rc})
            return codes

        def judge() -> Comparison:
            _record(scratch, self.machine, base, head, cells, rule)
            return compare.compare_runs(scratch, base, head, self.machine, rule=rule, workloads=workloads,
                                        history=self.history, together=True, joint=workloads)

        try:
            with worktrees(sides, self.repo_dir) as trees:
                paired = _CellRounds(sides, trees, scratch, self.machine, self.jobs,
                                     tuple(dict.fromkeys(c[0] for c in cells)), None, watched, self.groups,
                                     log=self.log, name="bisect", cells=list(cells),
                                     first_compiles=min(COMPILES, self.budget.most))
                budget = rounds.Budget(seconds=max(seconds, 1.0), max_compiles=self.budget.max_compiles)
                return rounds.until_decided(paired, judge, budget, max(rule.confirm), self.clock,
                                            (lambda c: classify(c.cells, change)[0] != SKIPPED) if change else None)
        except FlowError:
            if head[:8] in failed:
                return f"its run failed (exit {failed[head[:8]]})"
            raise

    def keep(self, k: int, commit: str) -> None:
        """`commit`'s run of step `k` merged into the results directory, unless it has one of this machine already
        (the first measurement of a commit is the one kept)."""
        scratch = self.work / f"step-{k}" / "results"
        self.results.mkdir(parents=True, exist_ok=True)
        if commit[:8] in stored_in_dir(self.results, self.machine):
            return
        for path in confined.files(scratch, f"{glob.escape(self.machine)}/*.json", confined.quiet):
            if path.name != "machine.json" and not path.name.startswith(commit[:8]):
                path.unlink()  # the other side's run: the good end's is another range's (or another step's)
        merge.merge_results([scratch], self.results, [default_cells_dir(scratch)], default_cells_dir(self.results))
        self.stored.append(commit)


def _record(results: Path, machine: str, base: str, head: str, cells: Sequence[Cell], rule: ChangeRule) -> None:
    """The paired record of what the step's two cell stores hold now (tracker.store.pairing)."""
    cells_dir = default_cells_dir(results)
    store = CellStore.of_run(cells_dir, RunKey(machine, head, torch_version()))
    if store is None:
        return
    workloads = tuple(dict.fromkeys(c[1] for c in cells))
    record = pairing.from_stores(cells_dir, machine, store.key.torch, base, head, sorted(cells), scope=workloads,
                                 joint=workloads, scope_text=f"Bisecting {', '.join('/'.join(c) for c in cells)}.",
                                 **recorded(rule))
    pairing.write(cells_dir, record)


__all__ = ["BisectRequest", "Bisected", "Bisector", "bisect", "cells_to_bisect", "first_parents", "missing_workloads",
           "parse_cell", "parse_instance"]
