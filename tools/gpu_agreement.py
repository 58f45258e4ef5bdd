"""Benchmark (not a test) of `run --gpus`: do the per-cell medians of a run on n GPUs agree with a one-GPU run as
closely as two one-GPU runs agree with each other?

On the GPU host (each step is the real CLI), one commit C, one results directory R:

    compile-baselines run --preset prefill decode --gpus 1 --machine one-a --commit C --results-dir R   # one GPU
    compile-baselines run --preset prefill decode --gpus 1 --machine one-b --commit C --results-dir R   # again
    compile-baselines run --preset prefill decode --gpus all --machine multi --commit C --results-dir R

Anywhere, on what those left behind (the cell store beside R, R/../cells, as `run` keeps it):

    python tools/gpu_agreement.py R --pair one-a one-b --pair one-a multi [--min-us 50]

Each `--pair BASE HEAD` names two runs by machine: its latest run, or MACHINE@COMMIT (a hash prefix). For each pair
it prints the cells in common (measured ok in both) and the distribution of |head/base - 1| over their medians as
the result files record them: median, p90, max, and how many cells lie beyond 5% and 10%. Where a run's cells record
the GPU that measured them (`gpu_index` in the cell store, since `--gpus`), the same per GPU of that run. The one-GPU
pair's distribution is the yardstick for the others.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tracker.runner.worker import GPU_INDEX
from tracker.stats import quantile
from tracker.store.asvjson import RunFile
from tracker.store.cells import default_cells_dir
from tracker.store.results import list_runs, load_runs, select_runs, stored_texts

Key = tuple[str, str, str]  # preset, workload, mode
LIMITS = (0.05, 0.10)


@dataclass(frozen=True)
class Cell:
    """A cell as one run measured it: its median, and the GPU that measured it (None for runs before --gpus)."""

    median_ms: float
    gpu: str | None = None


@dataclass(frozen=True)
class Spread:
    """|head/base - 1| over some cells."""

    cells: int
    median: float
    p90: float
    max: float
    beyond: tuple[int, ...]  # cells beyond each of LIMITS

    @classmethod
    def of(cls, deviations: Sequence[float]) -> Spread:
        return cls(len(deviations), statistics.median(deviations), quantile(deviations, 0.9), max(deviations),
                   tuple(sum(d > limit for d in deviations) for limit in LIMITS))


@dataclass(frozen=True)
class Agreement:
    """Two runs' cells in common and how far their medians differ: overall, and per GPU of each side ("base",
    "head") whose cells record it."""

    in_common: int
    overall: Spread | None
    per_gpu: dict[str, dict[str, Spread]] = field(default_factory=dict)


def agreement(base: Mapping[Key, Cell], head: Mapping[Key, Cell], min_ms: float = 0.0) -> Agreement:
    """`min_ms`: only the cells whose base median is at least this long (host-bound cells of a few us differ between
    runs by far more than the GPU-bound ones)."""
    common = sorted(k for k in base.keys() & head.keys() if base[k].median_ms >= min_ms)
    deviation = {k: abs(head[k].median_ms / base[k].median_ms - 1) for k in common}
    per_gpu: dict[str, dict[str, Spread]] = {}
    for side, cells in (("base", base), ("head", head)):
        if any(cells[k].gpu is not None for k in common):
            # str(None): a cell measured before --gpus recorded the GPU, in a run resumed since
            on = {k: str(cells[k].gpu) for k in common}
            per_gpu[side] = {g: Spread.of([deviation[k] for k in common if on[k] == g])
                             for g in sorted(set(on.values()))}
    return Agreement(len(common), Spread.of(list(deviation.values())) if common else None, per_gpu)


def pick(runs: list[RunFile], spec: str) -> RunFile:
    """MACHINE (its latest run) or MACHINE@COMMIT."""
    machine, _, commit = spec.partition("@")
    return select_runs(runs, machine, commit or None)[-1]


def measured(results_dir: Path, runs: Sequence[RunFile]) -> tuple[dict[Path, dict[Key, Cell]], list[str]]:
    """The ok cells of each run by its result file (their medians from the result files, their GPUs from the cell
    store beside them), and the loader's warnings."""
    cells_dir = default_cells_dir(results_dir)
    loaded = load_runs(runs, cells_dir=cells_dir)
    t = loaded.table[loaded.table["status"] == "ok"].reset_index(drop=True)
    t["gpu_index"] = stored_texts(t, cells_dir, GPU_INDEX)
    out: dict[Path, dict[Key, Cell]] = {}
    for run in runs:
        rows = t[(t["commit"] == run.commit) & (t["machine"] == run.machine) & (t["torch"].astype(str) == run.torch)]
        out[run.path] = {(str(r.preset), str(r.workload), str(r.mode)): Cell(float(r.median_ms), r.gpu_index)
                    for r in rows.itertuples(index=False)}
    return out, loaded.warnings


def _line(label: str, s: Spread) -> str:
    beyond = ", ".join(f"beyond {limit:.0%}: {n}" for limit, n in zip(LIMITS, s.beyond, strict=True))
    return (f"  {label:<18} median {s.median:6.2%}, p90 {s.p90:6.2%}, max {s.max:6.2%}; {beyond} "
            f"({s.cells} cells)")


def _name(run: RunFile) -> str:
    return f"{run.machine} {run.commit[:8]}"


def render(base: RunFile, head: RunFile, measured_base: int, measured_head: int, a: Agreement,
           min_us: float = 0.0) -> str:
    gpus = dict.fromkeys(r.params.get("gpu", "unknown") for r in (base, head))
    torches = dict.fromkeys(r.torch for r in (base, head))
    lines = [f"{_name(base)} vs {_name(head)} ({' / '.join(torches)}, {' / '.join(gpus)}): {a.in_common} cells in "
             f"common{f' of {min_us:g} us or more' if min_us else ''} (of {measured_base} and {measured_head} "
             "measured)"]
    if a.overall is not None:
        lines.append(_line("|head/base - 1|", a.overall))
    for side, groups in a.per_gpu.items():
        run = base if side == "base" else head
        lines += [_line(f"{run.machine} GPU {gpu}", s) for gpu, s in groups.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="asv results directory (its cell store beside it)")
    parser.add_argument("--pair", nargs=2, action="append", required=True, metavar=("BASE", "HEAD"),
                        help="two runs: MACHINE (its latest run) or MACHINE@COMMIT")
    parser.add_argument("--min-us", type=float, default=0.0,
                        help="only the cells whose base median is at least this many us (default: every cell)")
    a = parser.parse_args(argv)
    runs, warnings = list_runs(a.results)
    pairs = [(pick(runs, b), pick(runs, h)) for b, h in a.pair]
    cells, loading = measured(a.results, list({r.path: r for pair in pairs for r in pair}.values()))
    for warning in warnings + loading:
        print(f"warning: {warning}", file=sys.stderr)
    for b, h in pairs:
        print(render(b, h, len(cells[b.path]), len(cells[h.path]),
                     agreement(cells[b.path], cells[h.path], a.min_us / 1e3), a.min_us))
    return 0


if __name__ == "__main__":
    sys.exit(main())
