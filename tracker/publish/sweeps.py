"""A plugin workload's shape sweep as one table: at each point of the sweep (a preset such as `batch=1,seq=128`),
the best mode of the latest run, its speedup over eager, and each kernel under test's speedup over that best.

The report's per-preset sections already hold every figure (its rows and kernel rows); this only regroups them by
workload along the sweep's declared order (workloads.shapes), so a kernel's speedup reads across shapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workloads import catalog


@dataclass(frozen=True)
class SweepPoint:
    preset: str
    point: tuple[tuple[str, int], ...]  # the swept dimensions' values
    best: str | None  # the winning mode; None: no mode measured ok
    best_ms: float | None
    best_vs_eager: float | None  # eager median / best median
    kernels: tuple[float | None, ...]  # per SweepView.candidates: speedup over the best (None: not measured ok)


@dataclass(frozen=True)
class SweepView:
    workload: str
    axes: tuple[str, ...]
    candidates: tuple[str, ...]
    points: tuple[SweepPoint, ...]


def sweep_views(by_preset: Mapping[str, tuple[Sequence[Any], Sequence[Any]]]) -> list[SweepView]:
    """Sweep tables from one run's sections: `by_preset` maps a preset to its report rows (report.Row: workload,
    cells) and kernel rows (report.KernelRow). One view per plugin workload with two or more measured points."""
    views = []
    for w in catalog.plugin_workloads():
        swept = [p for p in w.presets if p.sweep and p.name in by_preset]
        points = []
        for shape in swept:
            rows, kernels = by_preset[shape.name]
            row = next((r for r in rows if r.workload == w.name), None)
            if row is None:
                continue
            best = next((c for c in row.cells if c.best and c.status == "ok"), None)
            mine = {k.candidate: k for k in kernels if k.workload == w.name}
            points.append((shape, best, mine))
        if len(points) < 2:
            continue
        candidates = tuple(sorted({name for _, _, mine in points for name in mine}))
        views.append(SweepView(w.name, swept[0].sweep, candidates, tuple(
            SweepPoint(shape.name, tuple(shape.point.items()), best.mode if best else None,
                       best.median_ms if best else None, best.speedup if best else None,
                       tuple(mine[c].speedup_vs_best if c in mine and mine[c].status == "ok" else None
                             for c in candidates))
            for shape, best, mine in points)))
    return views
