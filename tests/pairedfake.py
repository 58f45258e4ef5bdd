"""A stand-in for `compile-baselines run` in the PR flow's worktrees, for the paired rounds: it writes each cell's
compiles into the cell store as the runner does (one replicate file a compile) and records the run's asv results
from the store.

Constructed data, not measurements: a cell's compile r at a commit is its latency in a real H100 run
(tests/fixtures/h100-aa4, run h100-f, replicate 1), times the change planted for that commit, times a draw of the
cell's noise (log-normal, `sd`, seeded by cell, commit and compile, so a test is the same every time); a planted
cell's compiles at that commit carry other generated code in their fingerprint, as a code change's do. Its runs are
keyed by this host's torch. The GPU a compile records is the CUDA_VISIBLE_DEVICES its run was given. A side's run of
its kernels (tracker.flows.kernelrun, `python -c`) becomes the `run` that script's `command` makes of it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tracker.flows import kernelrun
from tracker.flows.sides import Command
from tracker.measure.cellresult import CellResult
from tracker.store import asvfiles
from tracker.store.cells import CellStore, RunKey, default_cells_dir, torch_version
from workloads.modes import AUTOTUNED_MODES

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "fixtures" / "h100-aa4"
SOURCE_STORE = CellStore.of_run(SOURCE / "cells", RunKey("h100-f", "d44d0c8bbf2fea5162c97fde781f1fe4813d81cc",
                                                          "2.11.0+cu130"))
# the H100 host's entry, under this host's torch: the flow finds a run's cell store by the torch it runs with
ENTRY = {k: v for k, v in json.loads((SOURCE / "results" / "h100-f" / "machine.json").read_text()).items()
         if k != "version"} | {"torch": torch_version()}
Cell = tuple[str, str, str]
_SUITE: dict[str, Any] = {}


def _draw(*key: object) -> float:
    seed = int.from_bytes(hashlib.sha256("/".join(map(str, key)).encode()).digest()[:8], "big")
    return random.Random(seed).gauss(0.0, 1.0)


class PairedFake:
    """`runner(commands)` for tracker.flows: `changes[commit][cell]` multiplies the cell's latency at that commit;
    `sd(cell)` is the cell's noise between compiles (natural log)."""

    def __init__(self, machine: str, changes: Mapping[str, Mapping[Cell, float]] | None = None,
                 sd: Callable[[Cell], float] = lambda cell: 0.01, rc: int = 0,
                 entry: Mapping[str, str] | None = None) -> None:
        self.machine, self.changes, self.sd, self.rc = machine, changes or {}, sd, rc
        self.entry = {**ENTRY, **(entry or {})}
        self.calls: list[Command] = []
        self.batches: list[list[str]] = []

    def __call__(self, commands: Sequence[Command]) -> list[int]:
        self.batches.append([c.label for c in commands])
        return [self.one(c) for c in commands]

    def one(self, c: Command) -> int:
        self.calls.append(c)
        argv = c.argv
        if argv[1] == "-c":  # the side's kernels, listed by tracker.flows.kernelrun as the side's code would
            line = kernelrun.command(argv[3:])
            if line is None:
                return 0
            argv = [sys.executable, *line]
        assert argv[:4] == [sys.executable, "-m", "tracker.cli", "run"]
        commit, results = _value(argv, "--commit"), Path(_value(argv, "--results-dir"))
        assert _value(argv, "--machine") == self.machine
        store = CellStore(default_cells_dir(results), RunKey(self.machine, commit, torch_version()))
        kernels = _values(argv, "--kernel") or ["all"]
        cells = [x for x in self._cells(argv) if not x[2].startswith("kernel:") or "all" in kernels
                 or f"{x[1]}:{x[2].removeprefix('kernel:')}" in kernels]
        run = f"fake-run-{len(self.calls)}"  # each command a run of its own, as each `run` process is
        for cell in cells:
            have = len(store.replicates(*cell))
            for r in range(have + 1, _replicates(argv, cell) + 1):
                out = self._compile(cell, commit, r, c.env.get("CUDA_VISIBLE_DEVICES"))
                store.put(CellResult.from_json(out | {"run_id": run}))
        if self.rc == 0:
            self._record(results, commit, store)
        return self.rc

    def _cells(self, argv: list[str]) -> list[Cell]:
        if "--cell" in argv:
            return [tuple(x.split("/")) for x in _values(argv, "--cell")]  # type: ignore[misc]
        workloads, presets = set(_values(argv, "--workload")), set(_values(argv, "--preset")) or None
        return sorted((c.preset, c.workload, c.mode) for c in SOURCE_STORE.all()
                      if c.has("mode") and c.replicate_number == 1 and c.workload in workloads
                      and (presets is None or c.preset in presets))

    def _compile(self, cell: Cell, commit: str, r: int, gpu: str | None) -> dict[str, Any]:
        source = SOURCE_STORE.replicate(*cell)
        assert source is not None, cell
        planted = self.changes.get(commit, {}).get(cell)
        factor = (planted or 1.0) * math.exp(self.sd(cell) * _draw(*cell, commit, r))
        out = {**source.to_json(), "replicate": r}
        if planted is not None and isinstance(out.get("fingerprint"), dict):
            out["fingerprint"] = {**out["fingerprint"], "code": f"{out['fingerprint'].get('code')}+{commit[:8]}"}
        if out["status"] == "ok":
            for key in ("median_ms", "p25_ms", "p99_ms"):
                if out.get(key) is not None:
                    out[key] = out[key] * factor
            out["samples_ms"] = [x * factor for x in out["samples_ms"]]
        out.pop("gpu_index", None)
        return out | ({"gpu_index": gpu} if gpu is not None else {})

    def _record(self, results: Path, commit: str, store: CellStore) -> None:
        conf = asvfiles.load_conf(ROOT / "asv.conf.json", str(results))
        key = str(results)
        if key not in _SUITE:
            with contextlib.redirect_stdout(sys.stderr):  # asv's discovery log; a real run's goes to its own process
                _SUITE[key] = asvfiles.suite(conf, sys.executable, commit)
        asvfiles.record_run(conf, sys.executable, self.machine, commit, 1_767_225_600_000, store.cells(), {},
                            entry=self.entry | {"machine": self.machine}, discovered=_SUITE[key])


def _replicates(argv: list[str], cell: Cell) -> int:
    """The compiles `run` makes of `cell`: --replicates (on a GPU host 3 by default) for every mode with
    --replicate-all-modes, else for the autotuned modes; one for the others."""
    n = int(_value(argv, "--replicates")) if "--replicates" in argv else 3
    return n if "--replicate-all-modes" in argv or cell[2] in AUTOTUNED_MODES else 1


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def _values(argv: list[str], flag: str) -> list[str]:
    if flag not in argv:
        return []
    after = argv[argv.index(flag) + 1:]
    return after[:next((i for i, a in enumerate(after) if a.startswith("-")), len(after))]
