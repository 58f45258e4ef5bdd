"""The measurements a run still has to make, as the cell store tells: each cell's first, its further compiles, and
what a finished measurement asks for next."""

from __future__ import annotations

from typing import Any

from tracker.measure.harness import FAILED
from tracker.runner.config import RunConfig
from tracker.runner.plan import CellId, Job
from tracker.runner.schedule import queue_order
from tracker.store.cells import CellStore


def pending(cells: list[CellId], cfg: RunConfig, store: CellStore) -> list[Job]:
    """The measurements still to make as far as the store tells: each cell's first measurement, and the next further
    compile of a cell whose first measurement is stored and asks for more (`next_replicate`; the rest follow it);
    failed ones again with retry_failed. In queue order."""
    todo = [Job(c, rs[0]) for c in cells if (rs := _to_make(c, cfg, store))]
    order = {c: i for i, c in enumerate(queue_order(list(dict.fromkeys(j.cell for j in todo))))}
    return sorted(todo, key=lambda j: (order[j.cell], j.replicate))


def planned(cells: list[CellId], cfg: RunConfig, store: CellStore) -> int:
    """How many measurements the run will make if every first measurement works: `pending`'s, and the further
    compiles that follow them (`next_replicate`), so progress counts toward the whole run from its first line."""
    return sum(len(_to_make(c, cfg, store)) for c in cells)


def _to_make(c: CellId, cfg: RunConfig, store: CellStore) -> list[int]:
    """The replicates of `c` still to make, in order: its first measurement (a failed one again with retry_failed)
    and the further compiles after it; once its first is in, the further compiles it lacks; none after a failed
    first."""
    first = store.replicate(c.preset, c.workload, c.mode, 1)
    if first is None or _todo(first, cfg):
        return [1, *lacking(c, cfg, store)]
    return lacking(c, cfg, store) if first["status"] == "ok" else []


def lacking(c: CellId, cfg: RunConfig, store: CellStore, after: int = 1) -> list[int]:
    """The cell's replicates after `after` that the store lacks, or whose measurement failed."""
    return [r for r in range(after + 1, cfg.replicates_of(c) + 1)
            if (stored := store.replicate(c.preset, c.workload, c.mode, r)) is None or stored["status"] == FAILED]


def _todo(stored: dict[str, Any] | None, cfg: RunConfig) -> bool:
    return stored is None or (cfg.retry_failed and stored["status"] == FAILED)


def next_replicate(job: Job, result: dict[str, Any], cfg: RunConfig, store: CellStore) -> list[Job]:
    """The cell's next further compile once `job` is done: the first replicate after it that the store lacks (or
    whose measurement failed), none when the cell's first measurement failed or none is lacking. A host-bound cell
    gets them too: its compiles can differ as much as a GPU-bound one's.

    One at a time: two compiles of one cell side by side hold twice its memory while they autotune, and the largest
    cells then run out of GPU memory and are measured again alone at the end (docs/runner.md has both cases). A
    further compile that failed is measured again by the next run: the cell's result is its first measurement's,
    and one further compile cut short (an interrupted run) must not leave the cell unconfirmed for good."""
    if job.replicate == 1 and result.get("status") != "ok":
        return []
    return [Job(job.cell, r) for r in lacking(job.cell, cfg, store, after=job.replicate)[:1]]


