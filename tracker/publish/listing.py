"""`compile-baselines list`: what can be measured here: the study's workloads, the plugins', the modes, the presets
and the kernels under test, each table under its column headers, with the plugins that could not be loaded and why."""

from __future__ import annotations

from workloads import catalog, plugins
from workloads.names import MODES


def list_main() -> int:
    from workloads.kernels.registry import REGISTRY
    from workloads.registry import WORKLOADS
    from workloads.shapes import describe

    print(f"the study's workloads ({len(WORKLOADS)}):")
    print(f"  {'workload':30} {'domain':10} {'presets':16} tags")
    for w in WORKLOADS:
        print(f"  {w.name:30} {w.domain:10} {'prefill only' if w.decode_invariant else 'prefill, decode':16} "
              f"{', '.join(w.tags)}")
    extra = catalog.plugin_workloads()
    if extra or plugins.REGISTRY.plugin_errors:
        print("plugin workloads (presets of their own):")
    if extra:
        print(f"  {'workload':30} {'domain':10} presets; tags  (plugin)")
    for w in extra:
        print(f"  {w.name:30} {w.domain:10} {describe(w.presets)}; {', '.join(w.tags)}  "
              f"({plugins.REGISTRY.sources[w.name.split('.')[0]]})")
    for name, why in plugins.REGISTRY.plugin_errors.items():
        print(f"  workload plugin {name} skipped: {why}")
    print(f"modes: {', '.join(MODES)}\npresets: {', '.join(catalog.preset_names())}")
    print("kernels under test (--kernel):")
    print(f"  {'kernel':48} devices  (defined in)")
    for c in REGISTRY.candidates():
        state = "" if c.enabled else f", disabled: {c.disabled_reason}"
        print(f"  {c.key:48} {', '.join(c.devices)}{state}  ({c.source})")
    for name, why in REGISTRY.plugin_errors.items():
        print(f"  plugin {name} skipped: {why}")
    return 0
