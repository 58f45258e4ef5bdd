"""What `compile-baselines list` shows: what can be measured here: the study's workloads, the plugins', the modes,
the presets and the kernels under test, each table under its column headers, with the plugins that could not be
loaded and why."""

from __future__ import annotations

from workloads import catalog, plugins
from workloads.names import MODES


def render() -> str:
    """The listing, one table under another."""
    from workloads.kernels.registry import REGISTRY
    from workloads.registry import WORKLOADS
    from workloads.shapes import describe

    lines: list[str] = []
    lines.append(f"the study's workloads ({len(WORKLOADS)}):")
    lines.append(f"  {'workload':30} {'domain':10} {'presets':16} tags")
    for w in WORKLOADS:
        lines.append(f"  {w.name:30} {w.domain:10} {'prefill only' if w.decode_invariant else 'prefill, decode':16} "
                     f"{', '.join(w.tags)}")
    extra = catalog.plugin_workloads()
    if extra or plugins.REGISTRY.plugin_errors:
        lines.append("plugin workloads (presets of their own):")
    if extra:
        lines.append(f"  {'workload':30} {'domain':10} presets; tags  (plugin)")
    for w in extra:
        lines.append(f"  {w.name:30} {w.domain:10} {describe(w.presets)}; {', '.join(w.tags)}  "
                     f"({plugins.REGISTRY.sources[w.name.split('.')[0]]})")
    for name, why in plugins.REGISTRY.plugin_errors.items():
        lines.append(f"  workload plugin {name} skipped: {why}")
    lines.append(f"modes: {', '.join(MODES)}\npresets: {', '.join(catalog.preset_names())}")
    lines.append("kernels under test (--kernel):")
    lines.append(f"  {'kernel':48} devices  (defined in)")
    for c in REGISTRY.candidates():
        state = "" if c.enabled else f", disabled: {c.disabled_reason}"
        lines.append(f"  {c.key:48} {', '.join(c.devices)}{state}  ({c.source})")
    for name, why in REGISTRY.plugin_errors.items():
        lines.append(f"  plugin {name} skipped: {why}")
    return "\n".join(lines) + "\n"
