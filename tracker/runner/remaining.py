"""The measurements a run still has to make, as the cell store tells: each cell's first, its further compiles, and
what a finished measurement asks for next."""

from __future__ import annotations

from tracker.measure.cellresult import FAILED, OK, CellResult
from tracker.runner.config import RunConfig
from tracker.runner.plan import CellId, Job
from tracker.store.cells import CellStore
from workloads.modes import COMPILED


def waits_for_first(c: CellId) -> bool:
    """Whether the cell's further compiles wait for its first: those of a mode torch.compile compiles reuse its
    Triton binaries (tracker.runner.workerenv.cache_dirs). An eager cell's have nothing to reuse, a kernel under
    test's little (a part of its Triton build), so all its compiles start at once (docs/runner.md)."""
    return c.mode in COMPILED


def pending(cells: list[CellId], cfg: RunConfig, store: CellStore) -> list[Job]:
    """The measurements still to make as far as the store tells: each cell's first measurement, and the next further
    compiles (`cfg.together` of them) of a cell whose first measurement is stored and asks for more
    (`next_replicate`; the rest follow them); every one at once of a cell that does not wait for its first; failed
    ones again with retry_failed. In the cells' order (the scheduler orders them, tracker.runner.schedule)."""
    return [Job(c, r) for c in cells if (rs := to_make(c, cfg, store))
            for r in (rs if not waits_for_first(c) else rs[:1] if rs[0] == 1 else rs[:max(1, cfg.together)])]


def planned(cells: list[CellId], cfg: RunConfig, store: CellStore) -> int:
    """How many measurements the run will make if every first measurement works: `pending`'s, and the further
    compiles that follow them (`next_replicate`), so progress counts toward the whole run from its first line."""
    return sum(len(to_make(c, cfg, store)) for c in cells)


def to_make(c: CellId, cfg: RunConfig, store: CellStore) -> list[int]:
    """The replicates of `c` still to make, in order: its first measurement (a failed one again with retry_failed)
    and the further compiles after it; once its first is in, the further compiles it lacks; none after a failed
    first."""
    first = store.replicate(c.preset, c.workload, c.mode, 1)
    if first is None or _todo(first, cfg):
        return [1, *lacking(c, cfg, store)]
    return lacking(c, cfg, store) if first.status == OK else []


def lacking(c: CellId, cfg: RunConfig, store: CellStore, after: int = 1) -> list[int]:
    """The cell's replicates after `after` that the store lacks, or whose measurement failed."""
    return [r for r in range(after + 1, cfg.replicates_of(c) + 1)
            if (stored := store.replicate(c.preset, c.workload, c.mode, r)) is None or stored.status == FAILED]


def _todo(stored: CellResult | None, cfg: RunConfig) -> bool:
    return stored is None or (cfg.retry_failed and stored.status == FAILED)


def next_replicate(job: Job, result: CellResult, cfg: RunConfig, store: CellStore) -> list[Job]:
    """The cell's next further compiles once `job` is done: after its first, the first `cfg.together` replicates
    that the store lacks (or whose measurement failed); after a further one r, the one `together` places on (r + 1
    with one at a time), the others being under way; none when the cell's first measurement failed or none is
    lacking. A host-bound cell gets them too: its compiles can differ as much as a GPU-bound one's.

    They start once the first is in: they reuse its Triton binaries (tracker.runner.workerenv.cache_dirs). Two
    compiles of one cell side by side hold twice its memory while they autotune; the scheduler keeps them within
    their GPU's memory by their recorded peaks (tracker.runner.schedule), and what ran out of memory beside others is
    measured again alone at the end (docs/runner.md). A further compile that failed is measured again by the next
    run: the cell's result is its first measurement's, and one further compile cut short (an interrupted run) must
    not leave the cell unconfirmed for good."""
    if (job.replicate == 1 and result.status != OK) or not waits_for_first(job.cell):
        return []  # a cell that does not wait for its first had them all started with it (`pending`)
    together = max(1, cfg.together)
    after = lacking(job.cell, cfg, store, after=job.replicate)
    if job.replicate == 1:
        return [Job(job.cell, r) for r in after[:together]]
    return [Job(job.cell, r) for r in after if r >= job.replicate + together][:1]


