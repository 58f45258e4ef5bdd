"""`compile-baselines pr`: a change's whole flow: find what it changed, measure that at its base and at its head in
pairs until each cell is decided (tracker.flows.rounds), compare, render, and hand the comment to the forge.

Only the workloads whose code changed are measured (a domain module: the workloads it defines; a kernel module:
the workloads of its candidates, whose modes they are judged against), or all of them when the harness or the
dependency pins changed. The comparison judges every measured workload's instances on their modes together (their
source changed), with the paired test; the paired record it is judged from is kept with the runs, so a later
`compare` of the two runs gives the same verdicts. Where only kernels under test changed, the modes' cells are
measured once for both sides, or taken from the nightly's run (tracker.flows.baseline), unless `full` is asked.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tracker.analyse import compare
from tracker.analyse.attribution import Selection, definitions_reached, select_workloads
from tracker.analyse.changes import Comparison
from tracker.analyse.compare import ChangeRule
from tracker.analyse.confirm import COMPILES
from tracker.analyse.paired import recorded, rule_for
from tracker.flows import baseline, rounds
from tracker.flows.forge import Forge
from tracker.flows.sides import Runner, Side, changed_files, merge_base, resolve, run_commands, workloads_at, worktrees
from tracker.paths import REPO_ROOT
from tracker.publish import prcomment, units
from tracker.runner import gpus
from tracker.runner.workerenv import usable_cpus
from tracker.store import pairing
from tracker.store.cells import CellStore, RunKey, default_cells_dir, torch_version
from tracker.store.pairing import SharedBaseline


@dataclass(frozen=True)
class PrRequest:
    """What `pr` is asked: the two refs, where the results go, how to measure and how long."""

    base_ref: str
    head_ref: str
    results_dir: Path = Path(".asv/results")
    jobs: int | None = None
    machine: str | None = None
    presets: Sequence[str] | None = None
    modes: Sequence[str] | None = None
    scope: Sequence[str] | None = None  # the workloads this repository measures (a kernel repository's own)
    history: Sequence[str | os.PathLike[str]] = ()
    fail_on: str = "never"
    budget: rounds.Budget = field(default_factory=rounds.Budget)
    repo_dir: Path = REPO_ROOT
    full: bool = False  # every cell in pairs, even where only kernels under test changed (no shared baseline)
    whole_modules: bool = False  # every workload of a changed module, not only those whose definitions changed


def pr(request: PrRequest, forge: Forge, runner: Runner | None = None, devices: Sequence[str] | None = None,
       log: TextIO | None = None) -> Comparison | None:
    """The comparison the PR's rounds decided, handed to `forge`; None when the PR changed no workload (the forge
    was told so). `devices`: the GPUs to spread the rounds over (None: the host's); `log`: where the flow says what
    it measures and what came of the post (None: stderr). Errors raise (typed: tracker.errors)."""
    if request.fail_on not in compare.FAIL_ON:
        raise ValueError(f"fail_on is one of {', '.join(compare.FAIL_ON)}, not {request.fail_on!r}")
    started = time.monotonic()
    repo_dir, results = Path(request.repo_dir).resolve(), Path(request.results_dir).resolve()
    machine = request.machine or socket.gethostname()
    base, head = resolve(request.base_ref, repo_dir), resolve(request.head_ref, repo_dir)
    files = changed_files(base, head, repo_dir)
    reached = None if request.whole_modules else definitions_reached(files, merge_base(base, head, repo_dir), head,
                                                                     repo_dir)
    selection = select_workloads(files, reached=reached)
    if request.scope is not None:
        selection = selection.within(request.scope)
    log = log or sys.stderr
    print(f"pr: base {base[:12]} ({request.base_ref}), head {head[:12]} ({request.head_ref}), "
          f"{units.count(len(files), 'changed file')}; {selection.describe()}", file=log)
    if not selection.workloads:
        _post(forge, prcomment.render_skipped(base, head, files, selection.reasons), False, log)
        return None
    sides = _sides(selection.workloads, base, head, repo_dir, log)
    plan = None if request.full or request.budget.compiles else \
        baseline.choose(selection, sides, request.history, machine, request.presets, request.modes, repo_dir, files)
    if plan is not None:
        print(f"pr: {plan.describe()}", file=log)
    if dropped := _drop_unpaired(results, machine, sides, plan is None):
        print(f"pr: {units.count(dropped, 'measurement')} an interrupted round stored at one side only dropped: "
              "measured again beside the other side", file=log)
    rule = rule_for(request.budget.most, COMPILES)
    devices = gpus.listed() if devices is None else devices
    # the comparison's statistics import scipy (a second): imported while round 1 measures rather than after it
    threading.Thread(target=importlib.import_module, args=("scipy.stats",), daemon=True).start()
    with worktrees(sides, repo_dir) as trees:
        presets = plan.presets if plan else request.presets  # a kernel-only change: both sides name theirs
        paired = rounds.PairedRounds(sides, trees, results, machine, request.jobs, presets, request.modes,
                                     runner or run_commands, rounds.groups_of(devices, usable_cpus()), log,
                                     baseline=plan.source if plan else None,
                                     first_compiles=min(rounds.KERNEL_ONLY_FIRST if plan else COMPILES,
                                                        request.budget.most),
                                     kernel_files=plan.files if plan else None)
        judge = _Judge(request, results, machine, (base, head), sides, selection, rule, plan, paired)
        comparison = rounds.until_decided(paired, judge, request.budget, max(rule.confirm), stopped=judge.stopped_by)
    for w in comparison.warnings:
        print(f"warning: {w}", file=log)
    _post(forge, prcomment.render_comment(comparison, max_chars=forge.body_limit), comparison.changed, log)
    print(_times(time.monotonic() - started, paired.measured, judge.spent), file=log)
    return comparison


def _times(total: float, measured: Sequence[float], judged: float) -> str:
    """Where the wall time went: measuring (the sides' runs, each round), judging (reading the runs, sharing a
    baseline, the paired record, the comparison) and the rest (git, worktrees, rendering, the post)."""
    rounds = " + ".join(f"{m:.0f}" for m in measured) or "0"
    return (f"pr: done in {total:.0f} s: measuring {sum(measured):.0f} s ({rounds}), judging {judged:.0f} s, "
            f"the rest {max(total - sum(measured) - judged, 0):.0f} s")


def _sides(workloads: Sequence[str], base: str, head: str, repo_dir: Path, log: TextIO) -> list[Side]:
    """Each commit with the selected workloads it has."""
    sides = []
    for label, commit in (("base", base), ("head", head)):
        there = workloads_at(commit, repo_dir)
        if names := tuple(w for w in workloads if there is None or w in there):
            sides.append(Side(label, commit, names))
            print(f"pr: measuring {units.count(len(names), 'workload')} at {commit[:12]}", file=log)
    return sides


@dataclass
class _Judge:
    """After each round: the baseline shared once (a kernel-only change), the paired record written, the comparison."""

    request: PrRequest
    results: Path
    machine: str
    commits: tuple[str, str]  # base, head
    sides: list[Side]
    selection: Selection
    rule: ChangeRule
    plan: baseline.Plan | None
    rounds: rounds.PairedRounds
    shared: SharedBaseline | None = None
    spent: float = 0.0  # seconds spent judging, over all rounds
    stopped: str = ""  # why the rounds stopped with cells left to decide: kept in the record

    def stopped_by(self, why: str, comparison: Comparison) -> Comparison:
        """The last round's comparison, its record rewritten to say why the rounds stopped (nothing else in it
        changed, so the comparison is not made again)."""
        self.stopped = comparison.stopped = f"Measuring stopped, {why}."
        self._write_record()
        return comparison

    def __call__(self) -> Comparison:
        began = time.monotonic()
        try:
            return self._judge()
        finally:
            self.spent += time.monotonic() - began

    def _judge(self) -> Comparison:
        r, workloads = self.request, self.selection.workloads
        if self.plan is not None and self.shared is None and len(self.sides) == 2:
            self.plan, self.shared = baseline.settle(self.plan, self.results, self.machine, self.sides,
                                                     Path(r.repo_dir).resolve(), self.rounds.at_head,
                                                     self.rounds.baseline_kernels, self.rounds.log)
        self._write_record()
        return compare.compare_runs(self.results, *self.commits, self.machine,
                                    rule=self.rule, workloads=workloads, history=r.history, together=True,
                                    joint=workloads)

    def _write_record(self) -> None:
        said = self.plan is not None and self.shared is not None and bool(self.shared.cells)
        scope = self.selection.describe().capitalize() + "." + (f" {self.plan.describe()}" if said else "")
        _record(self.results, self.machine, self.sides, self.selection.workloads, scope, self.rule, self.shared,
                self.stopped)


def _drop_unpaired(results: Path, machine: str, sides: Sequence[Side], one_sided: bool) -> int:
    """A resumed PR's measurements of one side whose other side was never measured (tracker.store.pairing), of the
    workloads both sides measure; `one_sided`: whether a cell only one side holds is one (not where it may be a
    kernel-only change's baseline, measured once)."""
    if len(sides) < 2:
        return 0
    common = set(sides[0].workloads) & set(sides[1].workloads)
    return pairing.drop_unpaired(default_cells_dir(results), machine, torch_version(), sides[0].commit,
                                 sides[1].commit, common, one_sided)


def _record(results: Path, machine: str, sides: Sequence[Side], workloads: Sequence[str], scope_text: str,
            rule: ChangeRule, shared: SharedBaseline | None = None, stopped: str = "") -> None:
    """The paired record of what the two cell stores hold now (tracker.store.pairing), written beside the head's;
    the cells of a `shared` baseline are no pairs."""
    cells_dir = default_cells_dir(results)
    if len(sides) < 2:
        return
    base, head = sides[0].commit, sides[1].commit
    stores = [CellStore.of_run(cells_dir, RunKey(machine, c, torch_version())) for c in (base, head)]
    if stores[1] is None:
        return
    keys = [{(c.preset, c.workload, c.mode) for c in s.all() if c.has("mode")}
            if s else set() for s in stores]
    paired = sorted(k for k in keys[0] & keys[1] if shared is None or not shared.holds(k))
    record = pairing.from_stores(cells_dir, machine, stores[1].key.torch, base, head, paired,
                                 scope=tuple(workloads), joint=tuple(workloads), scope_text=scope_text,
                                 shared=shared, stopped=stopped, **recorded(rule))
    pairing.write(cells_dir, record)


def _post(forge: Forge, body: str, changed: bool, log: TextIO) -> None:
    """The job summary, then the comment; what happened to it on `log`."""
    forge.job_summary(body)
    said = forge.comment(body, changed)
    if said:
        print(said, file=log)


__all__ = ["PrRequest", "pr"]
