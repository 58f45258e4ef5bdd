"""Benchmark (not a test) of processes that stay (tracker.runner.resident): do the further compiles a process made
after another cell's measurement agree with their cell's first, fresh, compile as closely as further compiles made
in fresh processes do? Run on the cell stores of two runs of one commit on one host, one with `run`'s default and
one with `--fresh-processes`:

    python tools/stay_check.py STORE [STORE ...]

A STORE is a run's cell store directory (CELLS/MACHINE/COMMIT/torch-VERSION). For each it prints the measurements by
their place in their process (`process_turn`), the median CUDA start of fresh processes and of later turns, and over
the further compiles of cells of `--min-us` or more: |further/first - 1| (median, p90), and how many generated the
same code (fingerprint `code`) as the cell's first compile, per mode.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path

from tracker.measure.cellresult import CellResult
from tracker.stats import quantile
from tracker.store.cells import CellStore, RunKey

Key = tuple[str, str, str, int]


def load(store: Path) -> dict[Key, CellResult]:
    """The ok measurements of the run whose cell store is `store` (CELLS/MACHINE/COMMIT/torch-VERSION), by (preset,
    workload, mode, replicate), read as `run` reads them (tracker.store.cells.CellStore.all)."""
    key = RunKey(store.parent.parent.name, store.parent.name, store.name.removeprefix("torch-"))
    return {(r.preset, r.workload, r.mode, r.replicate_number): r
            for r in CellStore(store.parent.parent.parent, key).all() if r.ok}


def report(store: Path, min_us: float) -> list[str]:
    records = load(store)
    turns = Counter(r.process_turn or 1 for r in records.values())
    starts = {later: [r.phase_s.get("cuda_init", 0.0) for r in records.values() if bool(r.process_turn) == later]
              for later in (False, True)}
    moved: list[float] = []
    same: Counter[str] = Counter()
    compared: Counter[str] = Counter()
    for key, record in records.items():
        first = records.get((*key[:3], 1))
        if key[3] == 1 or first is None:
            continue
        codes = [(r.fingerprint or {}).get("code") for r in (first, record)]
        if all(codes):
            compared[key[2]] += 1
            same[key[2]] += codes[0] == codes[1]
        if first.median_ms and record.median_ms and first.median_ms * 1e3 >= min_us:
            moved.append(abs(record.median_ms / first.median_ms - 1))
    lines = [f"{store}: {len(records)} measurements; by their place in their process: "
             + ", ".join(f"{t}: {n}" for t, n in sorted(turns.items()))]
    lines.append("  CUDA start (median s): fresh processes " + ", later turns ".join(
        f"{statistics.median(v):.3f}" if v else "-" for v in (starts[False], starts[True])))
    if moved:
        lines.append(f"  further vs first compile, cells of {min_us:g} us or more: |further/first - 1| median "
                     f"{100 * statistics.median(moved):.2f}%, p90 {100 * quantile(moved, 0.9):.2f}% ({len(moved)})")
    lines.append("  the same generated code as the first compile: "
                 + ", ".join(f"{m} {same[m]}/{compared[m]}" for m in sorted(compared)))
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stores", nargs="+", type=Path)
    parser.add_argument("--min-us", type=float, default=50.0)
    args = parser.parse_args(argv)
    for store in args.stores:
        if not store.is_dir():
            print(f"stay_check: no cell store at {store}", file=sys.stderr)
            return 2
        print("\n".join(report(store, args.min_us)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
