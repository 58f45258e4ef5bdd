"""Write a run's asv result file again from its cell store, on any host: for a run whose measurements all reached
the store but whose results were not written (the GPU machine went back while `run` was writing them). On the GPU
host itself, the same `run` command again does this (it resumes, measures nothing and writes the results).

    python tools/record_from_cells.py RESULTS_DIR --machine h100-t3 --commit 003366eb

The run's date, machine entry and environment come from its result file where an earlier pass of the same commit
wrote one, so the file is the one `run` would have written on that host. A run that never wrote one (it stopped in
asv's discovery) takes them from the command line instead: `--date` (as `run --date` was given), `--python` (the
GPU host's, /opt/torch/.venv/bin/python3 on the device tool's machines) and `--like`, an asv machine.json of the same
host kind whose parameters the entry takes under this run's machine name. asv names the environment after that
python, which must run here: link its path to a python that has the project's dependencies. Every cell in the store
is recorded, its replicates combined, as `run` records them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tracker.paths import REPO_ROOT
from tracker.store import asvfiles
from tracker.store.cells import CellStore, RunKey, default_cells_dir
from tracker.store.results import list_runs


def record(results: Path, machine: str, commit: str, like: Path | None = None, date_ms: int | None = None,
           python: str | None = None) -> Path:
    runs = [r for r in (list_runs(results)[0] if results.is_dir() else [])
            if r.machine == machine and r.commit.startswith(commit)]
    if len(runs) > 1 or not (runs or like):
        raise SystemExit(f"record_from_cells: {len(runs)} result files of machine {machine}, commit {commit} in "
                         f"{results}; it needs exactly one, or none and --like, --date and --python")
    if runs:
        run = runs[0]
        key, date_ms = RunKey(run.machine, run.commit, run.torch), run.date_ms
        params = dict(run.params)
        python = params.pop("python")
    else:
        if date_ms is None or python is None:
            raise SystemExit("record_from_cells: a run without a result file needs --date and --python with --like")
        key = _only_store(default_cells_dir(results), machine, commit)
        params = {k: v for k, v in json.loads(like.read_text()).items() if k != "version"} | {"machine": machine}
    store = CellStore.of_run(default_cells_dir(results), key)
    if store is None:
        raise SystemExit(f"record_from_cells: no cell store for {machine} {key.commit[:12]} {key.torch}")
    if not Path(python).exists():
        raise SystemExit(f"record_from_cells: the run's python {python} is not on this host: link it to a python "
                         f"that has the project's dependencies (asv names the environment after it)")
    conf = asvfiles.load_conf(REPO_ROOT / "asv.conf.json", str(results))
    return asvfiles.record_run(conf, python, key.machine, key.commit, date_ms, store.cells(), {}, entry=params)


def _only_store(cells: Path, machine: str, commit: str) -> RunKey:
    """The one cell store of `machine` whose commit starts with `commit` (cells/MACHINE/COMMIT/torch-VERSION)."""
    found = sorted((cells / machine).glob(f"{commit}*/torch-*"))
    if len(found) != 1:
        raise SystemExit(f"record_from_cells: {len(found)} cell stores of {machine} {commit} under {cells}")
    return RunKey(machine, found[0].parent.name, found[0].name.removeprefix("torch-"))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--machine", required=True)
    ap.add_argument("--commit", required=True, help="a hash or a prefix of it")
    ap.add_argument("--like", type=Path, help="no result file: an asv machine.json of the same host kind")
    ap.add_argument("--date", type=int, help="no result file: the run's date, ms since the epoch")
    ap.add_argument("--python", help="no result file: the run's python on its host")
    a = ap.parse_args(argv)
    print(record(a.results, a.machine, a.commit, a.like, a.date, a.python), file=sys.stdout)


if __name__ == "__main__":
    main()
