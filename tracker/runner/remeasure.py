"""Confirmation on the GPU host: measure a comparison's candidate changes again at its head, in this checkout.

`compile-baselines compare --confirm` calls `confirm_head` before judging: the cells that moved
(tracker.analyse.confirm.candidates) get analyse.confirm.COMPILES more fresh processes, each compiling anew, beyond
the compiles the run already made; the run's results are recorded again with them all. The run's own compiles are
what found the candidate: a verdict read from them alone would keep whatever draw raised it (all of a run's compiles
can choose the same slower code, docs/verdicts.md). The base is not measured: it is history (an earlier commit,
another night). The PR flow, which can build both sides, measures base and head in pairs instead
(tracker.flows.rounds).

It measures as `run` does (tracker.runner.suite): on every GPU of the host, each compile recording its GPU, and what
ran out of memory beside others measured again alone at the end.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from tracker.analyse import confirm
from tracker.analyse.compare import ChangeRule, compare_runs
from tracker.errors import ToolError
from tracker.publish import units
from tracker.runner.config import RunConfig
from tracker.runner.plan import CellId
from tracker.runner.policy import default_jobs, default_together, device, memory_budget
from tracker.runner.request import pick_gpus
from tracker.runner.suite import run_suite
from tracker.store.cells import default_cells_dir, torch_version


def confirm_head(conf: Any, base: str, head: str, machine: str | None, head_machine: str | None = None,
                 allow_cross_versions: bool = False, jobs: int | None = None, repo_dir: Path | None = None,
                 cells_dir: Path | None = None, out: TextIO | None = None,
                 history: Sequence[str | os.PathLike[str]] = ()) -> int:
    """Measure each of the head's candidate cells in `confirm.COMPILES` more compiles and record them; how many
    cells. `history`: more results directories for the cells' noise (compare's --history). `out`: where progress
    goes (default: sys.stderr)."""
    results_dir, out = conf.results_dir, out or sys.stderr
    c = compare_runs(results_dir, base, head, machine, allow_cross_versions, ChangeRule(), head_machine=head_machine,
                     repo_dir=repo_dir, history=history)
    if c.head.torch != torch_version():
        raise ToolError(f"--confirm measures the head again here, with torch {torch_version()}, but the head run "
                        f"was measured with torch {c.head.torch}: run it where the head was measured")
    had = {(x.preset, x.workload, x.mode): x.compiles[1] if x.compiles else 1 for x in c.cells}
    more = {CellId(*k): had.get(k, 1) + confirm.COMPILES for k in confirm.candidates(c)}
    cells = list(more)
    if not cells:
        print("confirm: no cell moved beyond its noise: nothing to measure again", file=out)
        return 0
    dev = device(None)
    gpus = pick_gpus(dev, None)  # every GPU of the host, as `run` measures; each compile records its own
    cfg = RunConfig(store_root=Path(cells_dir or default_cells_dir(results_dir)).resolve(),
                    machine=c.head.machine, commit=c.head.commit, jobs=jobs or default_jobs(dev, len(gpus)),
                    device=dev, replicates_per_cell=more, gpus=gpus,
                    memory_budget=memory_budget(gpus) if gpus else None, together=default_together(dev))
    print(f"confirm: {units.count(len(cells), 'cell')} moved; measuring each at head {c.head.commit[:8]} in "
          f"{confirm.COMPILES} more compiles", file=out, flush=True)
    run = _latest(results_dir, c.head.machine, c.head.commit)
    run_suite(cells, cfg, conf, run.date_ms, out)
    return len(cells)


def _latest(results_dir: str, machine: str, commit: str) -> Any:
    from tracker.store.results import list_runs

    runs = [r for r in list_runs(results_dir)[0] if r.machine == machine and r.commit == commit]
    return max(runs, key=lambda r: r.date_ms)


__all__ = ["confirm_head"]
