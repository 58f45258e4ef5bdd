"""A GPU's memory shared out among the measurements in flight on it, whichever process started them.

On a GPU that several measurements share, one that allocates beside others can run out of memory (docs/runner.md).
Each measurement
therefore reserves what it is expected to need at most (tracker.runner.costs: its recorded peak memory, with room
for its CUDA context) before it creates a CUDA context, and waits while the reservations in flight and its own would
exceed the GPU's budget. The ledger is a JSON file beside the GPU's lock in the cell store's root, read and written
under a flock, so every `run` process measuring on that GPU shares it (the two sides of a PR measured at once).
Waiters are served in turn, except that one that fits now goes ahead of earlier ones that do not, while none of those
has waited PATIENCE_S: a large reservation does not hold up every small one behind it for a whole compile, and a
measurement that must run alone (it reserves the whole budget) still gets the GPU within PATIENCE_S of its turn plus
the time the measurements in flight take. A measurement larger than the budget runs when nothing else holds a
reservation. A reservation of a process that has died is dropped.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tracker.runner.gpus import file_key
from tracker.store import atomic

T = TypeVar("T")
# {"held": {pid: bytes}, "waiting": [pid, ...], "since": {pid: seconds since the epoch}}, pids as strings in keys
State = dict[str, Any]
PATIENCE_S = 20.0  # how long a waiter lets later ones that fit go ahead of it

ENV_LEDGER = "COMPILE_BASELINES_MEMORY_LEDGER"  # the GPU's ledger file; unset: nothing is reserved
ENV_BUDGET = "COMPILE_BASELINES_MEMORY_BUDGET"  # bytes the GPU's measurements may reserve together
ENV_RESERVE = "COMPILE_BASELINES_MEMORY_RESERVE"  # bytes this measurement reserves


@dataclass(frozen=True)
class MemoryLedger:
    path: Path
    budget: int
    poll_s: float = 0.05
    patience_s: float = PATIENCE_S

    @contextlib.contextmanager
    def reserved(self, nbytes: int, owner: int | None = None) -> Iterator[float]:
        """Hold `nbytes` of the budget for the block, once they fit and it is their turn (the module's docstring);
        yields the seconds waited. `owner`: the process the reservation is for (this one by default)."""
        owner = os.getpid() if owner is None else owner
        asked = time.monotonic()
        while not self._enter(owner, nbytes):
            time.sleep(self.poll_s)
        try:
            yield time.monotonic() - asked
        finally:
            self._update(lambda state: state["held"].pop(str(owner), None))

    def held(self) -> dict[int, int]:
        """The reservations in flight: bytes by process."""
        return {int(pid): n for pid, n in self._read()["held"].items()}

    def _enter(self, owner: int, nbytes: int) -> bool:
        def take(state: State) -> bool:
            waiting, held, since = state["waiting"], state["held"], state["since"]
            now = time.time()
            if owner not in waiting:
                waiting.append(owner)
                since[str(owner)] = now
            fits = not held or sum(held.values()) + nbytes <= self.budget
            ahead = waiting[:waiting.index(owner)]
            if not fits or any(now - since.get(str(pid), now) >= self.patience_s for pid in ahead):
                return False
            waiting.remove(owner)
            since.pop(str(owner), None)
            held[str(owner)] = nbytes
            return True

        return self._update(take)

    def _update(self, change: Callable[[State], T]) -> T:
        """Apply `change` to the ledger under its lock, the reservations of processes gone dropped first."""
        with atomic.locked(self.path.with_name(self.path.name + ".lock")):
            state = self._read()
            state["held"] = {pid: n for pid, n in state["held"].items() if _alive(int(pid))}
            state["waiting"] = [pid for pid in state["waiting"] if _alive(pid)]
            state["since"] = {pid: t for pid, t in state.get("since", {}).items() if int(pid) in state["waiting"]}
            answer = change(state)
            atomic.write_text(self.path, json.dumps(state) + "\n")
            return answer

    def _read(self) -> State:
        try:
            state = json.loads(self.path.read_text(encoding="utf-8"))
            if (isinstance(state, dict) and isinstance(state.get("held"), dict)
                    and isinstance(state.get("waiting"), list) and isinstance(state.get("since", {}), dict)):
                return state
        except (OSError, ValueError):
            pass
        # none yet, or damaged: what it held belongs to processes gone by now
        return {"held": {}, "waiting": [], "since": {}}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ledger_path(store_root: Path, gpu: str) -> Path:
    """The ledger of the GPU that CUDA_VISIBLE_DEVICES names `gpu`, beside its lock (tracker.runner.workerenv)."""
    return store_root / f".gpu-{file_key(gpu)}.memory.json"


def from_env() -> tuple[MemoryLedger, int] | None:
    """The ledger the runner set for this worker and the bytes it reserves, or None (no ledger: a CPU run, one cell
    at a time, or a GPU whose memory is not known)."""
    path, budget = os.environ.get(ENV_LEDGER), os.environ.get(ENV_BUDGET)
    if not path or not budget:
        return None
    return MemoryLedger(Path(path), int(budget)), int(os.environ.get(ENV_RESERVE) or 0)
