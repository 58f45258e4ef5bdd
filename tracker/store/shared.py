"""One measurement recorded for two runs: a shared baseline.

Where a change between two commits reaches only kernels under test, the modes' cells of their workloads compile the
same code at both commits on the same machine and torch: measured once, they are the baseline both commits' kernels
are compared with. The PR flow measures them in the head's run (or takes them from the nightly's run of a commit
whose workload code is the base's) and records that one measurement in both runs: in the asv result file of each,
exactly as the measuring run recorded it (tracker.store.merge.copy_entries), and, where the measuring run's cell
store is at hand, in the cell store of the other, each record marked `shared_from` with the commit it was measured
at. The paired record (tracker.store.pairing) names the cells shared and where they were measured.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from tracker.store import asvfiles, merge
from tracker.store.cells import CellStore, RunKey
from tracker.store.results import ResultsError, list_runs

SHARED_FROM = "shared_from"  # a cell-store record measured in another run: that run's commit
Cell = tuple[str, str, str]  # (preset, workload, mode)


def result_file(results_dir: str | Path, machine: str, commit: str, torch: str) -> Path | None:
    """The result file of the run of `commit` on `machine` under `torch` in `results_dir`, or None."""
    try:
        runs, _ = list_runs(results_dir)
    except ResultsError:
        return None
    found = [r for r in runs if r.machine == machine and r.commit == commit and r.torch == torch]
    return found[-1].path if found else None


def share_records(cells_dir: str | Path, source: RunKey, target: RunKey, cells: Iterable[Cell]) -> list[Cell]:
    """Every stored replicate of `cells` in the source run's cell store, copied into the target run's where it has
    none of that cell, each marked with the source's commit; the cells copied."""
    mine, theirs = CellStore(cells_dir, target), CellStore.of_run(cells_dir, source)
    copied = []
    for cell in cells:
        replicates = theirs.replicates(*cell) if theirs is not None else []
        if not replicates or mine.replicate(*cell) is not None:
            continue
        for record in replicates:
            mine.put(replace(record, shared_from=source.commit))
        copied.append(cell)
    return copied


def share_entries(results_dir: Path, source: Path, target: Path | None, cells: Iterable[Cell],
                  template: Path | None = None, commit: str = "", date_ms: int = 0) -> Path:
    """The entries of `cells` in the result file `source` copied into the result file `target` of `results_dir`; a
    missing target (a run that measured nothing) is first made, empty, for `commit` of `date_ms` with the header of
    `template` (a run of the same machine and environment). The target's path."""
    if target is None:
        if template is None:
            raise ValueError("a missing result file is made from a template")
        target = _empty_like(results_dir, template, commit, date_ms)
    return merge.copy_entries(source, target, results_dir, list(cells))


def _empty_like(results_dir: Path, template: Path, commit: str, date_ms: int) -> Path:
    from asv.results import Results

    like = Results.load(str(template))
    empty = Results(dict(like.params), like._requirements, commit, date_ms, like._python, like._env_name,
                    like.env_vars)
    conf = type("Conf", (), {"results_dir": str(results_dir)})()
    with asvfiles.results_lock(results_dir):
        return asvfiles.save_results(conf, empty, {k: str(v) for k, v in like.params.items() if k != "python"})


__all__ = ["SHARED_FROM", "result_file", "share_entries", "share_records"]
