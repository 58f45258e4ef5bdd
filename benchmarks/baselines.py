"""Every (preset, workload, mode) cell as an asv benchmark: thin wrappers over tracker.measure.harness.

One measurement per cell feeds every metric of tracker.metrics, each an asv benchmark track_<metric>. asv
runs each metric of each parameter combination in a fresh process (the study's isolation); the first of them
measures and stores the cell, the others read it from the cell store.

`Baseline` is the study's grid, the same whatever is installed, so its asv history never changes shape. The
installed plugins' workloads (docs/plugins.md) are `PluginBaseline`, over the plugins' own presets; it exists only
when a plugin is installed. Cells the study does not measure (decode-invariant workloads in decode, a plugin's
workload in a preset it does not declare, inputs too large for a CPU) raise NotImplementedError in setup, which asv
records as skipped.
"""

import statistics
from collections.abc import Callable
from typing import Any

from tracker.measure.cellresult import CellResult
from tracker.metrics import METRICS
from tracker.store.cells import CellStore, RunKey, check_measured, default_root, metric_value, stored_form
from workloads.catalog import plugin_preset_names, plugin_workload_names
from workloads.names import MODES, PRESET_NAMES, WORKLOAD_NAMES


def stored_or_measured(preset: str, workload: str, mode: str) -> CellResult:
    store = CellStore(default_root(), RunKey.from_env())
    cell = store.get(preset, workload, mode)
    if cell is None:
        from tracker.measure.harness import measure_cell  # torch is imported only when a cell is measured

        cell = stored_form(measure_cell(preset, workload, mode))
        store.put(cell)
    return cell


def _track(metric: str, unit: str) -> Callable[..., Any]:
    def track(self: Any, *params: str) -> Any:
        return metric_value(self.cell, metric)

    track.__name__ = f"track_{metric}"
    track.unit = unit  # type: ignore[attr-defined]
    return track


def with_metric_tracks(cls: type) -> type:
    """Give an asv benchmark class one track_<metric> method per metric of tracker.metrics, with its unit: each
    returns the metric's value of the cell that setup put in `self.cell`."""
    for metric in METRICS.values():
        track = _track(metric.name, metric.unit)
        track.__qualname__ = f"{cls.__qualname__}.{track.__name__}"
        setattr(cls, track.__name__, track)
    return cls


class _Cells:
    param_names = ["preset", "workload", "mode"]
    timeout = 1800  # max-autotune compiles of the prefill GEMMs take minutes
    number = 1
    repeat = 1

    def setup(self, preset: str, workload: str, mode: str) -> None:
        self.cell = stored_or_measured(preset, workload, mode)
        check_measured(self.cell)  # raises: skipped or failed, with the reason in asv's log


@with_metric_tracks
class Baseline(_Cells):
    # The study's presets and workloads only: installing a plugin never changes this grid or its history.
    params = (list(PRESET_NAMES), list(WORKLOAD_NAMES), list(MODES))
    # Pinned: editing this wrapper must not orphan history. Bump when the measured thing changes.
    version = "1"


if plugin_workload_names():  # read at import (asv discovers parameters then); no plugin, no class

    @with_metric_tracks
    class PluginBaseline(_Cells):
        # The installed plugins' workloads over their own presets (n/a where a workload does not declare one).
        params = (list(plugin_preset_names()), list(plugin_workload_names()), list(MODES))
        version = "1"


class Host:
    """The host's kernel-launch floor for this run (median over its cells): results from different hosts
    are only comparable with it known, since launch-bound cells measure the host, not the GPU."""

    version = "1"
    timeout = 600

    def setup(self) -> None:
        cells = CellStore(default_root(), RunKey.from_env()).all()
        values = [c.launch_us for c in cells if c.launch_us]
        if values:
            self.launch_us = statistics.median(values)
        else:
            from tracker.measure.harness import launch_overhead_us, pick_device

            self.launch_us = launch_overhead_us(pick_device())

    def track_launch_overhead(self) -> float:
        return self.launch_us

    track_launch_overhead.unit = "us"
