"""Every (preset, candidate) cell as an asv benchmark: a kernel under test, measured like a mode.

A candidate's cell is (preset, workload, "kernel:<name>") in the cell store and goes through the same
harness as the compile modes (tracker.measure.harness: eager inputs, correctness against eager, do_bench). The
second parameter is "workload:name" rather than workload x name, whose product would be almost all n/a.
A candidate that cannot run here (device, missing triton) or is wrong raises in setup, with the reason.
"""

from tracker.store.cells import check_measured
from workloads.catalog import preset_names
from workloads.kernels.registry import candidates, mode_of, split_key

from .baselines import stored_or_measured, with_metric_tracks


@with_metric_tracks
class Candidate:
    # Read at import (asv discovers parameters then): the in-tree candidates and the installed plugins'.
    params = (list(preset_names()), [c.key for c in candidates()])
    param_names = ["preset", "candidate"]
    # Pinned: editing this wrapper must not orphan history. Bump when the measured thing changes.
    version = "1"
    timeout = 1800
    number = 1
    repeat = 1

    def setup(self, preset: str, candidate: str) -> None:
        workload, name = split_key(candidate)
        self.cell = stored_or_measured(preset, workload, mode_of(name))
        check_measured(self.cell)  # raises: skipped or failed (incorrect included), with the reason
