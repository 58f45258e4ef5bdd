"""Every workload and preset name this process measures: the study's (workloads.names), then the plugins'.

The study's names need no import; a plugin's come from its entry point (workloads.plugins), loaded on first use.
Everything that lists, checks or orders names (the asv suite's grid, the command line, the runner, the results
reader, the reports) asks here, so a plugin workload is measured, stored and reported like the study's. With
no plugin installed, this is workloads.names plus one scan of the installed entry points.
"""

from __future__ import annotations

from workloads import plugins
from workloads.errors import UnknownName
from workloads.names import (
    DOMAINS,
    PRESET_NAMES,
    WORKLOAD_NAMES,
    check_name,
    domain_of,
    is_plugin_workload,
    unknown_name,
)
from workloads.names import applies as study_applies
from workloads.spec import Workload


def plugin_workloads() -> list[Workload]:
    return plugins.REGISTRY.workloads()


def workload_names() -> tuple[str, ...]:
    """The study's workloads in the study's order, then the plugins' in declaration order."""
    return (*WORKLOAD_NAMES, *(w.name for w in plugin_workloads()))


def preset_names() -> tuple[str, ...]:
    """The study's three, then every preset a plugin declares that is not one of them, in declaration order."""
    extra = dict.fromkeys(p.name for w in plugin_workloads() for p in w.presets)
    return (*PRESET_NAMES, *(p for p in extra if p not in PRESET_NAMES))


def plugin_workload_names() -> tuple[str, ...]:
    """The plugins' workloads in declaration order (none of the study's)."""
    return tuple(w.name for w in plugin_workloads())


def plugin_preset_names() -> tuple[str, ...]:
    """Every preset a plugin workload declares, in declaration order, a plugin's own `tiny` included: the preset axis
    of the plugins' asv benchmarks, kept apart from the study's grid."""
    return tuple(dict.fromkeys(p.name for w in plugin_workloads() for p in w.presets))


def domains() -> tuple[str, ...]:
    """The study's four domains, then those plugins declare."""
    extra = dict.fromkeys(w.domain for w in plugin_workloads())
    return (*DOMAINS, *(d for d in extra if d not in DOMAINS))


def domain(workload: str) -> str:
    if is_plugin_workload(workload):
        return plugins.REGISTRY.get(workload).domain
    return domain_of(workload)


def applies(preset: str, workload: str) -> bool:
    """Whether `workload` is measured in `preset`: a plugin's in the presets it declares, the study's as the study."""
    if is_plugin_workload(workload):
        return plugins.REGISTRY.get(workload).applies_to(preset)
    return preset in PRESET_NAMES and study_applies(preset, workload)


def check_workload(workload: str) -> str:
    """`workload` if it is the study's or an installed plugin's; else KeyError naming the closest names, the study's
    workloads and the plugins' (or that none is installed)."""
    known = workload_names()
    if workload not in known:
        ours = plugin_workload_names()
        plugins_part = f"; plugin workloads: {', '.join(ours) or 'none'}"
        raise unknown_name("workload", workload, known, f"the study's {', '.join(WORKLOAD_NAMES)}{plugins_part}")
    return workload


def check_preset(preset: str) -> str:
    return check_name("preset", preset, preset_names())


def expand(selectors: list[str] | tuple[str, ...]) -> list[str]:
    """Workload names for command-line selectors: a name, or `namespace.*` for every workload of a plugin."""
    known = workload_names()
    spaces = sorted({w.split(".")[0] for w in known if is_plugin_workload(w)})
    out: list[str] = []
    for sel in selectors:
        if sel.endswith(".*"):
            found = [w for w in known if w.startswith(sel[:-1])]
            if not found:
                raise UnknownName(f"no workloads match {sel!r}; plugin namespaces: {', '.join(spaces) or 'none'}")
        elif "*" in sel:  # a shell's glob, not the selector: say the selector
            stem = sel.split("*")[0].rstrip(".")
            hint = f"did you mean {stem + '.*'!r}?" if stem in spaces else "a plugin's workloads are NAMESPACE.*"
            raise UnknownName(f"no workload is named {sel!r}: {hint} (plugin namespaces: "
                              f"{', '.join(spaces) or 'none'})")
        else:
            found = [check_workload(sel)]
        out += [w for w in found if w not in out]
    return out
