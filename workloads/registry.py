"""The one explicit registry of the study's workloads, in the study's table order, and the plugins' after them."""

from __future__ import annotations

from workloads import catalog, diffusion, llm, plugins, rl, vlm
from workloads.names import WORKLOAD_NAMES, is_plugin_workload
from workloads.spec import Workload

_BY_NAME: dict[str, Workload] = {w.name: w for m in (llm, vlm, diffusion, rl) for w in m.WORKLOADS}
if set(_BY_NAME) != set(WORKLOAD_NAMES):
    raise ImportError(f"workload registry out of sync with names.py: {sorted(set(_BY_NAME) ^ set(WORKLOAD_NAMES))}")

# The study's workloads (a constant: no plugin is loaded by importing this module); `all_workloads` adds the plugins'.
WORKLOADS: tuple[Workload, ...] = tuple(_BY_NAME[n] for n in WORKLOAD_NAMES)


def get(name: str) -> Workload:
    catalog.check_workload(name)  # an unknown name: one error naming the study's and the plugins' workloads
    if is_plugin_workload(name):
        return plugins.REGISTRY.get(name)
    return _BY_NAME[name]


def all_workloads() -> list[Workload]:
    """The study's workloads, then every plugin's (workloads.plugins)."""
    return [*WORKLOADS, *catalog.plugin_workloads()]


def instances(preset: str) -> list[Workload]:
    """The workloads measured in `preset` (workloads.names.applies: the study's in prefill and tiny, all but the
    decode-invariant ones in decode) and the plugins' that declare it."""
    catalog.check_preset(preset)
    return [w for w in all_workloads() if w.applies_to(preset)]
