"""The cells a run measures: which presets, workloads, modes and kernels under test (`plan`), each a `CellId`, and one
measurement of a cell, a `Job` (its first compile or a further one)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tracker.errors import UsageError
from workloads import catalog
from workloads.kernels import registry as kernel_registry
from workloads.modes import MODES


@dataclass(frozen=True, order=True)
class CellId:
    preset: str
    workload: str
    mode: str

    def __str__(self) -> str:
        return f"{self.preset} {self.workload} {self.mode}"


@dataclass(frozen=True, order=True)
class Job:
    """One measurement: replicate `replicate` (1, 2, ...) of a cell, in a process of its own."""

    cell: CellId
    replicate: int = 1

    def __str__(self) -> str:
        return str(self.cell) if self.replicate == 1 else f"{self.cell} #{self.replicate}"


def plan(presets: Iterable[str], workloads: Iterable[str] | None = None, modes: Iterable[str] = MODES,
         kernels: Iterable[str] = ()) -> list[CellId]:
    """The cells the study measures among the given presets, workloads and modes, in the study's order, each
    workload's compile modes followed by its selected candidates ("kernel:<name>", see `kernel_modes`). Workloads
    default to every one, the installed plugins' included (workloads.catalog); a plugin's workload has cells in
    the presets it declares only."""
    all_workloads = catalog.workload_names()
    presets, modes = list(presets), list(modes)
    workloads = list(all_workloads if workloads is None else workloads)
    for kind, given, known in (("preset", presets, catalog.preset_names()), ("workload", workloads, all_workloads),
                               ("mode", modes, MODES)):
        unknown = [x for x in given if x not in known]
        if unknown:
            raise UsageError(f"unknown {kind} {unknown[0]!r}; choose from {', '.join(known)}")
    picked = kernel_modes(kernels, workloads)
    return [CellId(p, w, m) for p in presets for w in all_workloads if w in workloads and catalog.applies(p, w)
            for m in [*(m for m in MODES if m in modes), *picked.get(w, [])]]


def kernel_modes(selectors: Iterable[str], workloads: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Candidate modes per workload for `selectors`: "all", a candidate name (that name for every workload
    that has it) or "workload:name". Only candidates of `workloads` are kept; an unknown one is a UsageError."""
    workloads = set(catalog.workload_names() if workloads is None else workloads)
    registered = kernel_registry.candidates()
    chosen: dict[str, list[str]] = {}
    for sel in selectors:
        if sel == "all":
            found = registered
        elif ":" in sel:
            found = [kernel_registry.get(*kernel_registry.split_key(sel))]
        else:
            found = [c for c in registered if c.name == sel]
            if not found:
                known = ", ".join(c.key for c in registered) or "none"
                raise UsageError(f"unknown candidate {sel!r}; registered: {known}")
        for c in found:
            if c.workload in workloads and c.mode not in chosen.setdefault(c.workload, []):
                chosen[c.workload].append(c.mode)
    return chosen

