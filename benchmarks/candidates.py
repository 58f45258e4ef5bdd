"""Every (preset, candidate) cell as an asv benchmark: a kernel under test, measured like a mode.

A candidate's cell is (preset, workload, "kernel:<name>") in the cell store and goes through the same
harness as the compile modes (tracker.measure.harness: eager inputs, correctness against eager, do_bench). The
second parameter is "workload:name" rather than workload x name, whose product would be almost all n/a.
A candidate that cannot run here (device, missing triton) or is wrong raises in setup, with the reason.

`Candidate` holds the candidates of the study's workloads over the study's presets, whatever is installed;
`PluginCandidate` those of the plugins' workloads over the plugins' presets (only when there are any).
"""

from tracker.store.cells import check_measured
from workloads.catalog import plugin_preset_names
from workloads.kernels.registry import candidates, mode_of, split_key
from workloads.names import PRESET_NAMES, is_plugin_workload

from .baselines import stored_or_measured, with_metric_tracks


class _Candidates:
    param_names = ["preset", "candidate"]
    timeout = 1800
    number = 1
    repeat = 1

    def setup(self, preset: str, candidate: str) -> None:
        workload, name = split_key(candidate)
        self.cell = stored_or_measured(preset, workload, mode_of(name))
        check_measured(self.cell)  # raises: skipped or failed (incorrect included), with the reason


# Read at import (asv discovers parameters then): the in-tree candidates and the installed plugins'.
_STUDY = [c.key for c in candidates() if not is_plugin_workload(c.workload)]
_PLUGINS = [c.key for c in candidates() if is_plugin_workload(c.workload)]


@with_metric_tracks
class Candidate(_Candidates):
    params = (list(PRESET_NAMES), _STUDY)
    # Pinned: editing this wrapper must not orphan history. Bump when the measured thing changes.
    version = "1"


if _PLUGINS:

    @with_metric_tracks
    class PluginCandidate(_Candidates):
        params = (list(plugin_preset_names()), _PLUGINS)
        version = "1"
