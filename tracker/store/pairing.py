"""How two runs were measured against each other, kept with them: the record of a paired measurement.

The PR flow measures base and head in rounds: in each round every cell still undecided gets one more fresh compile at
base and one at head, the two started together on the same GPU, so that whatever drifts between rounds (clocks,
temperature, the host's load) and whatever differs between GPUs falls on both sides of a pair alike. The record
keeps each pair (round, the two latencies, the GPU of each) and what the comparison was asked (the workloads
measured, those whose source changed, the scope in words, the change test and its budget), so that any later
`compare` of the two runs judges exactly as the PR flow did.

Where only kernels under test changed, the modes' cells (the baseline the kernels are compared with) were measured
once for both sides, not in pairs: the record names them and the run they were measured in (`SharedBaseline`).

It lives in the head run's cell store, `paired-<base commit>.json`, beside the cells it summarises. Its format is
versioned (`FORMAT`, tracker.store.formats.PAIRED): `read` migrates older versions and refuses newer ones. Format 1
(before shared baselines) reads as a record with none.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tracker.errors import ToolError
from tracker.measure.cellresult import CellResult
from tracker.store import atomic, confined, formats
from tracker.store.cells import CellStore, RunKey, check_commit, is_latency

FORMAT = formats.PAIRED.current
Cell = tuple[str, str, str]  # (preset, workload, mode)


class PairingError(ToolError):
    """A paired record that cannot be read: damaged, or written by a newer version of the tool."""


@dataclass(frozen=True)
class Pair:
    """One round of one cell: a fresh compile at base and one at head, started together."""

    round: int
    base_ms: float
    head_ms: float
    base_gpu: str | None = None
    head_gpu: str | None = None
    # its two sides' runs, "BASE/HEAD" (CellResult.run_id): pairs of the same runs share their noise
    run: str | None = None

    @property
    def log_change(self) -> float:
        return math.log(self.head_ms / self.base_ms)


@dataclass(frozen=True)
class SharedBaseline:
    """Cells measured once and recorded for both sides, their code being the same at base and head: `cells`
    ("preset/workload/mode"), measured in the run of `commit` on the same machine and torch; `source`: "head" (round
    1 of this measurement) or "history" (a run of another results directory, `where`: the nightly's); `measured`: when
    that run measured them (ISO 8601, UTC; "" where unknown)."""

    cells: tuple[str, ...]
    commit: str
    source: str = "head"
    measured: str = ""
    where: str = ""

    def holds(self, cell: Cell) -> bool:
        return "/".join(cell) in self.cells


@dataclass(frozen=True)
class PairedRecord:
    """Base and head of one machine and torch measured in pairs (see the module docstring)."""

    machine: str
    torch: str
    base: str
    head: str
    scope: tuple[str, ...] = ()  # the workloads measured
    joint: tuple[str, ...] = ()  # of those, the ones whose own source changed: their modes are judged together
    scope_text: str = ""  # the scope in words, as the PR comment says it
    # The rule it was decided by: the compiles a side a change needs, the margin of "the same" and the pairs it needs
    # (0: any, as records of format 2 and before), the rounds a cell could get (the looks the sequential test allows
    # for)
    confirm: tuple[int, int] = (3, 3)
    same_within: float = 0.03
    max_compiles: int = 10
    same_pairs: int = 0
    confirm_rounds: int = 1  # the rounds a change needs, their shared noise weighed in (1: not counted, format 3)
    more_by_family: bool = False  # an undecided cell's estimate counts its instance's modes (False: format 4)
    kernel_undecided: bool = False  # a kernel's speedup is undecided where its cell is (False: format 5)
    round_by_scale: bool = False  # the rounds' shared variance scales with each cell's own (False: format 6)
    cells: Mapping[str, tuple[Pair, ...]] = field(default_factory=dict)  # "preset/workload/mode" -> its pairs
    shared: SharedBaseline | None = None  # the cells measured once for both sides (none: every cell in pairs)
    stopped: str = ""  # why the rounds stopped with cells they could still decide, in words ("": they did not)

    def pairs(self, cell: Cell) -> tuple[Pair, ...]:
        return self.cells.get("/".join(cell), ())

    @property
    def rounds(self) -> int:
        return max((p.round for ps in self.cells.values() for p in ps), default=0)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["cells"] = {k: [asdict(p) for p in v] for k, v in self.cells.items()}
        out["shared"] = None if self.shared is None else {**asdict(self.shared), "cells": list(self.shared.cells)}
        return formats.PAIRED.stamp(out)


def path(cells_dir: str | Path, machine: str, torch: str, base: str, head: str) -> Path:
    """Where the record of `base` against `head` lives: in the head run's cell store."""
    return CellStore(cells_dir, RunKey(machine, head, torch)).dir / f"paired-{check_commit(base)}.json"


def write(cells_dir: str | Path, record: PairedRecord) -> Path:
    target = path(cells_dir, record.machine, record.torch, record.base, record.head)
    confined.check(cells_dir, target.parent)
    atomic.write_json(target, record.to_json())
    return target


def find(cells_dir: str | Path, machine: str, torch: str, base: str, head: str) -> PairedRecord | None:
    """The record of these two runs, or None where they were not measured in pairs. The torch version is tried as
    recorded and without its local part, as the cell store is named (tracker.store.cells.CellStore.of_run)."""
    for t in dict.fromkeys((torch, torch.split("+")[0])):
        candidate = path(cells_dir, machine, t, base, head)
        if candidate.is_file() or candidate.is_symlink():
            return read(cells_dir, candidate)
    return None


def read(cells_dir: str | Path, file: Path) -> PairedRecord:
    """The record in `file`, read only if it lies in the cell store `cells_dir` (tracker.store.confined)."""
    try:
        data = json.loads(confined.read_text(cells_dir, file))
    except (OSError, ValueError, RecursionError) as e:
        raise PairingError(f"{file}: not a readable paired record ({e})") from None
    return from_json(data, str(file))


def from_json(data: Any, where: str = "paired record") -> PairedRecord:
    try:
        data = formats.PAIRED.read(data, where)  # older formats migrated (tracker.store.formats)
    except formats.FormatError as e:
        raise PairingError(str(e)) from None
    try:
        cells = {str(k): tuple(_pair(p) for p in v) for k, v in data["cells"].items()}
        return PairedRecord(str(data["machine"]), str(data["torch"]), check_commit(str(data["base"])),
                            check_commit(str(data["head"])), tuple(map(str, data.get("scope", ()))),
                            tuple(map(str, data.get("joint", ()))), str(data.get("scope_text", "")),
                            confirm=_confirm(data.get("confirm", (3, 3))),
                            same_within=float(data.get("same_within", 0.03)),
                            max_compiles=int(data.get("max_compiles", 10)), same_pairs=int(data["same_pairs"]),
                            confirm_rounds=int(data["confirm_rounds"]),
                            more_by_family=_flag(data["more_by_family"]),
                            kernel_undecided=_flag(data["kernel_undecided"]),
                            round_by_scale=_flag(data["round_by_scale"]),
                            cells=cells, shared=_shared(data.get("shared")), stopped=str(data["stopped"]))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise PairingError(f"{where}: damaged paired record ({e})") from None


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{value!r} is not true or false")
    return value


def _confirm(value: Any) -> tuple[int, int]:
    base, head = value
    return int(base), int(head)


def _shared(value: Any) -> SharedBaseline | None:
    if value is None:
        return None
    if not isinstance(value["cells"], list) or not all(isinstance(c, str) for c in value["cells"]):
        raise ValueError("its shared cells are not a list of cell names")
    return SharedBaseline(tuple(value["cells"]), check_commit(str(value["commit"])), str(value.get("source", "head")),
                          str(value.get("measured", "")), str(value.get("where", "")))


def _pair(p: Mapping[str, Any]) -> Pair:
    if not (is_latency(p["base_ms"]) and is_latency(p["head_ms"])):
        raise ValueError(f"round {p.get('round')}: a latency that no measurement gives")
    gpu = {k: None if p.get(k) is None else str(p[k]) for k in ("base_gpu", "head_gpu")}
    run = p.get("run")
    return Pair(int(p["round"]), float(p["base_ms"]), float(p["head_ms"]), **gpu, run=None if run is None else str(run))


def from_stores(cells_dir: str | Path, machine: str, torch: str, base: str, head: str,
                cells: Iterable[Cell], **asked: Any) -> PairedRecord:
    """The record of what the two runs' cell stores hold: a cell's pair of round r is replicate r of each side, both
    measured ok (the PR flow measures replicate r of both sides in round r). `asked`: the record's other fields."""
    stores = [CellStore.of_run(cells_dir, RunKey(machine, c, torch)) for c in (base, head)]
    out: dict[str, tuple[Pair, ...]] = {}
    for cell in cells:
        sides = [s.replicates(*cell) if s else [] for s in stores]
        pairs = tuple(Pair(r, b.median_ms, h.median_ms, _gpu(b), _gpu(h), _runs(b, h))
                      for r, (b, h) in enumerate(zip(*sides, strict=False), 1)
                      if b.ok and h.ok and b.median_ms is not None and h.median_ms is not None)
        if pairs:
            out["/".join(cell)] = pairs
    return PairedRecord(machine, torch, base, head, cells=out, **asked)


def drop_unpaired(cells_dir: str | Path, machine: str, torch: str, base: str, head: str,
                  workloads: Iterable[str], one_sided: bool = True) -> int:
    """Forget each measurement of one side that no measurement of the other side pairs, of the `workloads` measured
    in pairs: a cell's replicates past those both sides hold from 1 on. An interrupted round leaves them (one side's
    stored, the other's not); measured again, both sides of each pair are measured together and on one GPU, rather
    than the other side alone, later, perhaps on another GPU. `one_sided`: a cell only one side holds is unpaired too
    (not where it may be a baseline measured once for both sides: a kernel-only change's). How many were forgotten."""
    stores = [CellStore.of_run(cells_dir, RunKey(machine, c, torch)) for c in (base, head)]
    held: list[dict[Cell, set[int]]] = [{}, {}]
    measured = set(workloads)
    for side, store in zip(held, stores, strict=True):
        for r in store.all() if store else []:
            if r.has("mode") and r.workload in measured:
                side.setdefault((r.preset, r.workload, r.mode), set()).add(r.replicate_number)
    dropped = 0
    for cell in sorted(held[0].keys() | held[1].keys() if one_sided else held[0].keys() & held[1].keys()):
        numbers = [side.get(cell, set()) for side in held]
        paired = min(_run_from_one(n) for n in numbers)
        for store, extra in zip(stores, numbers, strict=True):
            for replicate in sorted(r for r in extra if r > paired):
                assert store is not None  # it holds this replicate
                store.remove(*cell, replicate)
                dropped += 1
    return dropped


def _run_from_one(numbers: set[int]) -> int:
    """How many of 1, 2, 3 ... `numbers` holds without a gap."""
    count = 0
    while count + 1 in numbers:
        count += 1
    return count


def _runs(base: CellResult, head: CellResult) -> str | None:
    """A pair's runs, "BASE/HEAD"; None where neither side recorded its run."""
    if base.run_id is None and head.run_id is None:
        return None
    return f"{base.run_id or '?'}/{head.run_id or '?'}"


def _gpu(record: CellResult) -> str | None:
    return None if record.gpu_index is None else str(record.gpu_index)


__all__ = ["FORMAT", "Pair", "PairedRecord", "PairingError", "SharedBaseline", "drop_unpaired", "find", "from_json",
           "from_stores", "path", "read", "write"]
