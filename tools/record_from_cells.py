"""Write a run's asv result file again from its cell store, on any host: for a run whose measurements all reached
the store but whose results were not written (the GPU machine went back while `run` was writing them). On the GPU
host itself, the same `run` command again does this (it resumes, measures nothing and writes the results).

    python tools/record_from_cells.py RESULTS_DIR --machine h100-t3 --commit 003366eb

The run must already have a result file (from an earlier pass of the same commit): its date, machine entry and
environment are kept, so the file is the one `run` would have written on that host. asv names the environment after
its python, which must run here: link the recorded path (e.g. /opt/torch/.venv/bin/python3) to a python that has the
project's dependencies. Every cell in the store is recorded, its replicates combined, as `run` records them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tracker.paths import REPO_ROOT
from tracker.store import asvfiles
from tracker.store.cells import CellStore, RunKey, default_cells_dir
from tracker.store.results import list_runs


def record(results: Path, machine: str, commit: str) -> Path:
    runs = [r for r in list_runs(results)[0] if r.machine == machine and r.commit.startswith(commit)]
    if len(runs) != 1:
        raise SystemExit(f"record_from_cells: {len(runs)} result files of machine {machine}, commit {commit} in "
                         f"{results}; it needs exactly one")
    run = runs[0]
    store = CellStore.of_run(default_cells_dir(results), RunKey(run.machine, run.commit, run.torch))
    if store is None:
        raise SystemExit(f"record_from_cells: no cell store for {machine} {run.commit[:12]} {run.torch}")
    cells = store.cells()
    params = dict(run.params)
    python = params.pop("python")
    if not Path(python).exists():
        raise SystemExit(f"record_from_cells: the run's python {python} is not on this host: link it to a python "
                         f"that has the project's dependencies (asv names the environment after it)")
    conf = asvfiles.load_conf(REPO_ROOT / "asv.conf.json", str(results))
    return asvfiles.record_run(conf, python, run.machine, run.commit, run.date_ms, cells, {}, entry=params)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--machine", required=True)
    ap.add_argument("--commit", required=True, help="a hash or a prefix of it")
    a = ap.parse_args(argv)
    print(record(a.results, a.machine, a.commit), file=sys.stdout)


if __name__ == "__main__":
    main()
