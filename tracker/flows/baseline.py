"""The baseline of a change that reaches only kernels under test: measured once for both sides, not in pairs.

A kernel's verdict is its speedup over the best mode of its instance (tracker.analyse.compare). Where a change reaches
only kernels under test (tracker.analyse.attribution: `Selection.kernel_only`), the modes' cells of its workloads
compile the same code at base and head on the same machine and torch, so one measurement of them serves both sides:

- **history**: a run of a `--history` results directory (the nightly's) of the same machine and torch (and, checked
  once the head's run is measured, the same GPU, driver, CUDA and triton), of a commit whose workloads' code is the
  base's (no difference between the two reaches their modes), holding every one of those modes' cells (and the
  untouched kernels' it measured): taken as the baseline, and round 1 measures only the changed kernels, at base
  and at head;
- **head**: else round 1 measures the modes' cells at head only, in as many compiles as `run` gives them by default
  (the nightly's: three of the autotuned modes on a GPU), beside the kernels at both sides.

The kernels under test the change did not touch (declared in files it left alone; none where it changed the candidates'
registry) are part of that baseline: measured once, with the modes, or taken from the nightly's run with them. Only
the kernels declared in the changed files are measured in pairs.

Either way the one measurement is recorded in both runs (tracker.store.shared), the paired record names the cells
shared and where they were measured (tracker.store.pairing.SharedBaseline), and the paired test judges them the same
by construction; only the kernels' cells go to the paired rounds. A run of the history whose versions turn out to
differ from the head's (its driver, say) is not used: the modes are then measured at head after all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tracker.analyse.attribution import KERNEL_HARNESS, Selection, kernel_declarations, source_changes
from tracker.flows.sides import Side
from tracker.runner import policy
from tracker.store import commits, shared
from tracker.store.asvjson import RunFile
from tracker.store.cells import CellStore, RunKey, default_cells_dir, torch_version
from tracker.store.merge import MergeError
from tracker.store.pairing import SharedBaseline
from tracker.store.results import ResultsError, list_runs, load_runs
from workloads import catalog
from workloads.modes import MODES

Cell = tuple[str, str, str]
HEAD, HISTORY = "head", "history"


@dataclass(frozen=True)
class Plan:
    """Where the baseline comes from: measured at head in round 1, or taken from `run` (of the directory `where`,
    measured at `measured_ms`); `cells`: the modes' and untouched kernels' cells it must hold (history); `files`:
    the changed files, whose kernels are measured in pairs (None: every kernel, the registry changed)."""

    source: str
    presets: tuple[str, ...] = ()  # what both sides measure: named to each side's run, whatever its defaults
    cells: tuple[Cell, ...] = ()
    files: tuple[str, ...] | None = None
    run: RunFile | None = None
    where: str = ""
    measured_ms: int | None = None

    def at_head(self) -> Plan:
        """The plan to fall back to: the modes measured at head."""
        return Plan(HEAD, self.presets, self.cells, self.files)

    def describe(self, now_ms: int | None = None) -> str:
        """The plan in words, for the PR comment."""
        if self.source == HEAD or self.run is None:
            return ("Only kernels under test changed: their cells were measured in pairs at base and head, and the "
                    "baseline they are compared with (the modes' cells and the kernels the change did not touch) "
                    "once for both sides, at head.")
        age = "" if self.measured_ms is None else \
            f", measured {_age((now_ms or _now_ms()) - self.measured_ms)} before this comparison"
        return ("Only kernels under test changed: their cells were measured in pairs at base and head, against the "
                f"baseline of the nightly's run of {self.run.commit[:8]} in {self.where} (same machine, GPU and "
                f"torch, the workloads' code the base's{age}).")


def choose(selection: Selection, sides: Sequence[Side], history: Sequence[str | Path], machine: str,
           presets: Sequence[str] | None, modes: Sequence[str] | None, repo_dir: Path,
           files: Sequence[str] = ()) -> Plan | None:
    """The baseline of a kernel-only change of `files` (None: any other change, measured whole in pairs)."""
    if not selection.kernel_only or len(sides) != 2 or sides[0].workloads != sides[1].workloads:
        return None
    workloads = sides[0].workloads
    named = tuple(presets or policy.default_presets(policy.device(None)))
    changed = None if set(files) & set(KERNEL_HARNESS) else tuple(files)
    untouched = [] if changed is None else \
        [(w, m) for path, kernels in kernel_declarations().items() if path not in changed for w, m in kernels]
    instances = [(p, w) for p in named for w in workloads if catalog.applies(p, w)]
    wanted = tuple((p, w, m) for p, w in instances for m in modes or MODES)
    kernels = tuple((p, w, m) for p, w in instances for k, m in untouched if k == w)
    for where in history:
        for run in reversed(_candidates(Path(where), machine)):
            if not _same_code(run.commit, sides[0].commit, workloads, repo_dir):
                continue
            if set(wanted) <= (measured := _measured(run)):
                # the untouched kernels it measured (not one of another device: a Triton kernel on a CPU)
                held = tuple(c for c in kernels if c in measured)
                return Plan(HISTORY, named, wanted + held, changed, run, str(where), _measured_ms(run.path))
    return Plan(HEAD, named, wanted + kernels, changed)


def _candidates(where: Path, machine: str) -> list[RunFile]:
    """The directory's runs of this machine and torch, oldest first. Their GPU, driver, CUDA and triton are checked
    against the head's run once it is measured (`share`): the machine's name says which host, not what it holds."""
    try:
        runs, _ = list_runs(where)
    except ResultsError:
        return []
    return [r for r in runs if r.machine == machine and r.torch == torch_version()]


def _same_code(commit: str, base: str, workloads: Sequence[str], repo_dir: Path) -> bool:
    """Whether no difference between `commit` and `base` reaches the modes of `workloads` (False where git cannot
    tell: a commit the repository lacks)."""
    reach = source_changes(commit, base, repo_dir)
    return reach is not None and (reach.kernel_only or not set(reach.workloads) & set(workloads))


def _measured(run: RunFile) -> set[Cell]:
    """The cells `run` measured (ok or failed)."""
    table = load_runs([run]).table
    if table.empty:
        return set()
    ran = table[table["status"].astype(str).isin(("ok", "failed"))]
    return set(zip(ran["preset"].astype(str), ran["workload"].astype(str), ran["mode"].astype(str), strict=True))


def _measured_ms(path: Path) -> int | None:
    """When the run measured its cells: the latest start asv recorded in its file."""
    from asv.results import Results

    try:
        started = [int(t) for t in Results.load(str(path)).started_at.values() if t]
    except Exception:  # an unreadable file: its age is unknown
        return None
    return max(started) if started else None


def share(plan: Plan, results: Path, machine: str, sides: Sequence[Side], repo_dir: Path,
          kernels: Sequence[Cell] = ()) -> SharedBaseline | None:
    """Record the baseline in both runs after round 1 (tracker.store.shared): the modes' cells and the untouched
    `kernels`' measured at head, or the plan's cells of the history's run. None where the plan's run cannot be used
    after all (another driver, say): the caller measures the baseline at head and shares that."""
    base, head = sides[0].commit, sides[1].commit
    torch = torch_version()
    files = {c: shared.result_file(results, machine, c, torch) for c in (base, head)}
    template = files[head] or files[base]
    if plan.source == HISTORY and plan.run is not None and template is not None:
        try:
            for commit in (base, head):
                files[commit] = shared.share_entries(results, plan.run.path, files[commit], plan.cells, template,
                                                     commit, commits.resolve(commit, repo_dir)[1])
        except MergeError:
            return None
        return SharedBaseline(tuple("/".join(c) for c in plan.cells), plan.run.commit, HISTORY,
                              _iso(plan.measured_ms), plan.where)
    cells_dir = default_cells_dir(results)
    store = CellStore.of_run(cells_dir, RunKey(machine, head, torch))
    untouched = set(kernels)
    at_head = sorted({(c.preset, c.workload, c.mode) for c in (store.all() if store else [])
                      if (c.mode in MODES or (c.preset, c.workload, c.mode) in untouched)
                      and c.workload in sides[1].workloads})
    if files[head] is None or not at_head:
        return SharedBaseline((), head)
    # Only the cells the base lacks: a base whose code could not list its kernels measured its modes itself
    copied = shared.share_records(cells_dir, RunKey(machine, head, torch), RunKey(machine, base, torch), at_head)
    if copied:
        shared.share_entries(results, files[head], files[base], copied, files[head], base,
                             commits.resolve(base, repo_dir)[1])
    return SharedBaseline(tuple("/".join(c) for c in copied), head, HEAD)


def settle(plan: Plan, results: Path, machine: str, sides: Sequence[Side], repo_dir: Path,
           at_head: Callable[[Sequence[Cell]], None], kernels: Callable[[], Sequence[Cell]],
           log: TextIO) -> tuple[Plan, SharedBaseline]:
    """`share` after round 1; where the history's run cannot be used after all, the baseline measured at head
    (`at_head`) and shared from there; `kernels`: the untouched kernels' cells measured at head so far. The plan
    followed and what the runs now share."""
    got = share(plan, results, machine, sides, repo_dir, kernels())
    if got is None:
        print(f"pr: the run of {plan.run.commit[:12] if plan.run else '?'} in {plan.where} was measured with other "
              "versions than this host's: measuring the baseline at head", file=log, flush=True)
        at_head(plan.cells)
        plan = plan.at_head()
        got = share(plan, results, machine, sides, repo_dir, kernels()) or SharedBaseline((), sides[-1].commit)
    return plan, got


def _now_ms() -> int:
    return int(time.time() * 1000)


def _iso(ms: int | None) -> str:
    return "" if ms is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def _age(ms: int) -> str:
    hours = max(ms, 0) / 3_600_000
    return f"{hours * 60:.0f} min" if hours < 1 else f"{hours:.0f} h" if hours < 48 else f"{hours / 24:.0f} days"


__all__ = ["HEAD", "HISTORY", "Plan", "choose", "settle", "share"]
