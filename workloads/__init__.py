"""The 23 workloads of the torch.compile mode study: pure PyTorch, no timing, no asv."""

from workloads.presets import PRESETS, Preset, get_preset
from workloads.registry import MODES, NAMES, WORKLOADS, check_mode, get, instances
from workloads.spec import DOMAINS, Workload

__all__ = [
    "DOMAINS", "MODES", "NAMES", "PRESETS", "WORKLOADS", "Preset", "Workload", "check_mode", "get",
    "get_preset", "instances",
]
