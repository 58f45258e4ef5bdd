"""In which order a run's measurements start: each cell's expected cost, the queue (longest first, the eager cells
spread among the rest, a cell's further compiles in front), and the split of the cells into shards."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from tracker.runner.plan import CellId, Job
from workloads import registry as workload_registry
from workloads.kernels import registry as kernel_registry
from workloads.modes import BY_NAME, REFERENCE
from workloads.names import is_plugin_workload

# The autotuned modes benchmark GEMM and convolution templates: the workloads tagged gemm or conv cost them most.
_AUTOTUNED_WORKLOADS = frozenset(w.name for w in workload_registry.WORKLOADS if {"gemm", "conv"} & set(w.tags))


def _autotuned(workload: str) -> bool:
    if workload in _AUTOTUNED_WORKLOADS:
        return True
    return is_plugin_workload(workload) and bool({"gemm", "conv"} & set(workload_registry.get(workload).tags))


def expected_cost(cell: CellId) -> float:
    if kernel_registry.candidate_name(cell.mode) is not None:
        return 8.0  # eager inputs plus a kernel's JIT compile
    mode = BY_NAME.get(cell.mode)
    if mode is None:
        return 20.0
    cost = mode.cost
    if mode.autotuned and _autotuned(cell.workload):
        cost += 30.0
    return cost



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


def queue_order(cells: list[CellId]) -> list[CellId]:
    """Longest first (the short ones fill the gaps at the end), with the eager cells spread evenly among the
    rest from the very first: they compile nothing, so they are almost all GPU-lock time and keep the GPU
    busy while the heaviest cells compile, rather than queueing for it at the end."""
    by_cost = sorted(cells, key=lambda c: (-expected_cost(c), c))
    light = [c for c in by_cost if c.mode == REFERENCE]
    heavy = [c for c in by_cost if c.mode != REFERENCE]
    if not light or not heavy:
        return by_cost
    step, out = len(heavy) / len(light), []
    for i, cell in enumerate(heavy):
        while len(out) - i < len(light) and (len(out) - i) * step <= i:
            out.append(light[len(out) - i])
        out.append(cell)
    return out + light[len(out) - len(heavy):]



class Queue:
    """The measurements waiting for a worker: the planned ones in queue order, and in front of them the further
    compiles that finished measurements asked for, oldest first. Those are the heaviest measurements
    (autotuned modes, each a full compile); left at the back they would all run last, with little else to keep the
    GPU busy beside them."""

    def __init__(self, planned: Iterable[Job]) -> None:
        self._front: deque[Job] = deque()
        self._planned: deque[Job] = deque(planned)

    def __bool__(self) -> bool:
        return bool(self._front or self._planned)

    def holds(self, cell: CellId) -> bool:
        return any(j.cell == cell for j in (*self._front, *self._planned))

    def push_front(self, jobs: Iterable[Job]) -> None:
        self._front.extend(jobs)

    def pop(self) -> Job:
        return (self._front or self._planned).popleft()


