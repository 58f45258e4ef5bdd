"""Commit or torch: when both changed between two runs, which one moved each best baseline and each significant cell.

Nightly N-1 measured commit C1 under torch A, nightly N commit C2 under torch B: their comparison (the direct one,
tracker.analyse.compare) mixes the two changes. A cross run separates them. C2 under torch A splits the way into
C1,A -> C2,A (the commit alone) and C2,A -> C2,B (torch alone); C1 under torch B into C1,A -> C1,B (torch alone) and
C1,B -> C2,B (the commit alone). Each leg is an ordinary comparison (compare.compare_files, with the direct
comparison's rule: the same verdicts, bands and noise rule), and each change of the direct comparison goes to the
leg(s) in which it moved:

- commit: it moved in the commit leg and stayed within its band in the torch leg; torch: the reverse;
- both: it moved in both legs; neither alone: it stayed within its band in both (two small moves that add up);
- undecided: a leg cannot say (too noisy, unjudged, moved with its source unchanged, not measured), the two cross
  runs disagree, or there is no cross run; then `DecisiveRun` names the one `compile-baselines run` that decides it.

"Moved" is the leg's own verdict: a best baseline that changed (InstanceChange.best_changed) or a significant cell;
"stayed" is a judged no-change (`same`, or failing on both sides). A cross run is looked up by its exact commit and
exact torch version (a nightly build's version names its day) among runs on the same GPU, the base's or the head's
machine first: the nightly keeps one machine per PyTorch channel, so the cross run is usually another channel's.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tracker.analyse.changes import CellChange, Comparison, InstanceChange
from tracker.analyse.compare import compare_files
from tracker.analyse.pairs import CompareError, RunInfo
from tracker.analyse.verdicts import (
    BY_BOTH,
    BY_COMMIT,
    BY_NEITHER,
    BY_TORCH,
    BY_UNDECIDED,
    CODE_UNCHANGED,
    FAILS,
    NOISY,
    SAME,
    SOURCE_UNCHANGED,
    UNDECIDED,
    UNKNOWN,
)
from tracker.store.asvjson import RunFile
from tracker.store.results import list_runs
from workloads.kernels.registry import MODE_PREFIX

# What one leg says of a change: it moved beyond its band, it stayed within it, or the leg cannot tell.
MOVED, STAYED, UNCLEAR = "moved", "stayed", "unclear"
# Moved beyond the band, but not judged as a change
_DOUBTFUL = (NOISY, UNDECIDED, UNKNOWN, SOURCE_UNCHANGED, CODE_UNCHANGED)
_CAUSE = {(MOVED, STAYED): BY_COMMIT, (STAYED, MOVED): BY_TORCH, (MOVED, MOVED): BY_BOTH, (STAYED, STAYED): BY_NEITHER}


def cause(commit: str, torch: str) -> str:
    """The change that moved something, from what the commit leg and the torch leg each say of it (MOVED, STAYED,
    UNCLEAR): a leg that cannot tell leaves it BY_UNDECIDED."""
    return _CAUSE.get((commit, torch), BY_UNDECIDED)


@dataclass(frozen=True)
class Route:
    """One cross run and the two legs through it, each an ordinary comparison."""

    cross: RunInfo
    commit: Comparison  # the commit alone, under one torch version
    torch: Comparison  # torch alone, at one commit


@dataclass(frozen=True)
class Attributed:
    """One change of the direct comparison and the change that made it."""

    preset: str
    workload: str
    mode: str | None  # None: the instance's best baseline; else the cell's mode (or kernel:NAME)
    change: str  # what the direct comparison says (the instance's reason, the cell's verdict)
    cause: str  # BY_COMMIT, BY_TORCH, BY_BOTH, BY_NEITHER or BY_UNDECIDED
    why: str  # what each leg said, per cross run; or why it is undecided


@dataclass(frozen=True)
class DecisiveRun:
    """The one run that decides what no cross run can: head's commit under base's torch, of the workloads whose
    changes are undecided. Its machine must keep one torch version per commit (pairs._pick), so it is base's
    machine when head's is another, else base's name with the torch version added."""

    commit: str
    torch: str
    machine: str
    presets: tuple[str, ...]
    workloads: tuple[str, ...]
    kernels: tuple[str, ...]  # WORKLOAD:NAME of the undecided kernel cells; none: `--kernel none`

    def command(self) -> str:
        """The `compile-baselines run` to start in an environment with torch `self.torch` installed, each value
        quoted for a shell (the machine's and the kernels' names are the results')."""
        words = ["--preset", *self.presets, "--workload", *self.workloads, "--kernel", *(self.kernels or ["none"]),
                 "--machine", self.machine, "--commit", self.commit]
        return "compile-baselines run " + shlex.join(words)


@dataclass
class Attribution:
    base: RunInfo  # C1 under torch A
    head: RunInfo  # C2 under torch B
    routes: list[Route]
    items: list[Attributed]  # the direct comparison's best-baseline changes, then its significant cells
    decisive: DecisiveRun | None  # when there is no cross run and something is undecided

    def by(self, cause: str) -> list[Attributed]:
        return [a for a in self.items if a.cause == cause]


def attribute(results_dir: str | os.PathLike[str], direct: Comparison,
              repo_dir: Path | None = None) -> Attribution | None:
    """Which change, the commit or torch, moved each best baseline and each significant cell of `direct` (a
    comparison of two runs in `results_dir`). None when only one of them changed: the direct comparison is then that
    change's alone. With `repo_dir`, the commit legs report cells the source cannot reach as SOURCE_UNCHANGED."""
    b, h = direct.base, direct.head
    if b.commit == h.commit or b.torch == h.torch:
        return None
    runs, _ = list_runs(results_dir)
    bf, hf = _run_file(runs, b), _run_file(runs, h)
    routes = []
    x = _cross(runs, h.commit, b.torch, bf, hf)  # C2 under torch A
    if x is not None:
        commit = compare_files(results_dir, bf, x, direct.rule, repo_dir)
        routes.append(Route(commit.head, commit, compare_files(results_dir, x, hf, direct.rule)))
    x = _cross(runs, b.commit, h.torch, bf, hf)  # C1 under torch B
    if x is not None:
        torch = compare_files(results_dir, bf, x, direct.rule)
        routes.append(Route(torch.head, compare_files(results_dir, x, hf, direct.rule, repo_dir), torch))
    items = [_attributed(i.preset, i.workload, None, i.reason, routes, b, h) for i in direct.best_changes]
    items += [_attributed(c.preset, c.workload, c.mode, c.verdict, routes, b, h) for c in direct.cells
              if c.significant]
    decisive = None
    if not routes and items:
        machine = b.machine if b.machine != h.machine else f"{b.machine}-torch-{b.torch}"
        decisive = DecisiveRun(h.commit, b.torch, machine,
                               _unique(a.preset for a in items), _unique(a.workload for a in items),
                               _unique(f"{a.workload}:{a.mode.removeprefix(MODE_PREFIX)}" for a in items
                                       if a.mode and a.mode.startswith(MODE_PREFIX)))
    return Attribution(b, h, routes, items, decisive)


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))  # in order of first appearance


def _run_file(runs: list[RunFile], info: RunInfo) -> RunFile:
    mine = [r for r in runs if (r.commit, r.machine, r.torch) == (info.commit, info.machine, info.torch)]
    if not mine:
        raise CompareError(f"no result file of {info.commit[:12]} on {info.machine} under torch {info.torch}: "
                           "attribution reads the results directory")
    return mine[-1]


def _cross(runs: list[RunFile], commit: str, torch: str, b: RunFile, h: RunFile) -> RunFile | None:
    """The latest run of `commit` under exactly `torch` on base's GPU, on base's or head's machine when one has it."""
    found = [r for r in runs if r.commit == commit and r.torch == torch and r.params.get("gpu") == b.params.get("gpu")]
    ours = [r for r in found if r.machine in (b.machine, h.machine)]
    return (ours or found or [None])[-1]


def leg_state(c: Comparison, preset: str, workload: str, mode: str | None) -> tuple[str, str]:
    """What one leg's comparison says of an instance's best baseline (mode None) or of a cell: MOVED, STAYED or
    UNCLEAR, and the leg's own words for it."""
    return _instance_leg(c, preset, workload) if mode is None else _cell_leg(c, preset, workload, mode)


def _instance_leg(c: Comparison, preset: str, workload: str) -> tuple[str, str]:
    """What a leg says of an instance's best baseline: its state and its own words."""
    i: InstanceChange | None = next((i for i in c.instances if (i.preset, i.workload) == (preset, workload)), None)
    if i is None:
        return UNCLEAR, "not measured on both sides"
    words = i.reason or f"{i.head_best} best, latency {i.latency_verdict}"
    if i.best_changed:
        return MOVED, words
    winners = {i.base_best, i.head_best}
    doubtful = [x for x in c.cells if (x.preset, x.workload) == (preset, workload) and x.mode in winners
                and x.verdict in _DOUBTFUL]
    return (UNCLEAR if i.latency_verdict in _DOUBTFUL or doubtful else STAYED), words


def _cell_leg(c: Comparison, preset: str, workload: str, mode: str) -> tuple[str, str]:
    x: CellChange | None = next((x for x in c.cells if (x.preset, x.workload, x.mode) == (preset, workload, mode)),
                                None)
    if x is None:
        return UNCLEAR, "not measured"
    words = x.verdict + (f" ({x.ratio:.2f}x)" if x.ratio is not None else "")
    return (MOVED if x.significant else STAYED if x.verdict in (SAME, FAILS) else UNCLEAR), words


def _attributed(preset: str, workload: str, mode: str | None, change: str, routes: list[Route], b: RunInfo,
                h: RunInfo) -> Attributed:
    if not routes:
        return Attributed(preset, workload, mode, change, BY_UNDECIDED,
                          f"no cross run: neither {h.commit[:8]} under torch {b.torch} nor {b.commit[:8]} under "
                          f"torch {h.torch} was measured")
    causes, whys = [], []
    for r in routes:
        (cs, cw), (ts, tw) = (leg_state(c, preset, workload, mode) for c in (r.commit, r.torch))
        causes.append(cause(cs, ts))
        whys.append(f"via {r.cross.commit[:8]} under torch {r.cross.torch}: commit alone {cw}; torch alone {tw}")
    if len(set(causes)) == 1:
        return Attributed(preset, workload, mode, change, causes[0], "; ".join(whys))
    return Attributed(preset, workload, mode, change, BY_UNDECIDED, "the cross runs disagree: " + "; ".join(
        f"{w} ({c})" for c, w in zip(causes, whys, strict=True)))


__all__ = ["MOVED", "STAYED", "UNCLEAR", "Attributed", "Attribution", "DecisiveRun", "Route", "attribute", "cause",
           "leg_state"]
