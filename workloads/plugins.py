"""Workloads from other repositories: the entry-point group `compile_baselines.workloads`.

A kernel repository declares its workloads (workloads.spec.Workload, with their own presets from
workloads.shapes) in a module with a `WORKLOADS` tuple, as the study's domain modules do, and names that module
in its pyproject:

    [project.entry-points."compile_baselines.workloads"]
    myrepo = "myrepo.workloads"

The entry point's name is the namespace: every workload it declares is named `myrepo.<name>`, so no plugin's
name can be one of the study's workloads or another plugin's. An entry point may also name a callable that returns the
workloads. Like the kernel plugins, entry points load lazily, once per process; a plugin that fails to import
gives one PluginWarning and is left out. A clash (two plugins with one namespace, a workload named outside its
namespace, a name declared twice) is not skipped: it is one WorkloadClash naming both sides, raised whenever the
workloads are asked for, since measuring either side alone would file results under a name that is not theirs.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType
from typing import Any

from workloads.errors import UnknownName, WorkloadClash, failure_line
from workloads.names import NAMESPACE, check_plugin_workload, plugin_enabled
from workloads.spec import Workload

ENTRY_POINT_GROUP = "compile_baselines.workloads"
__all__ = ["ENTRY_POINT_GROUP", "PluginWarning", "Registry", "Source", "WorkloadClash", "collect", "entry_points"]


class PluginWarning(UserWarning):
    """A workload plugin failed to load; its workloads are left out and the rest go on."""


@dataclass(frozen=True)
class Source:
    """Where a plugin's workloads come from: its entry point, as `name = value (distribution)`."""

    namespace: str
    value: str
    dist: str

    def __str__(self) -> str:
        return f"{self.value} ({self.dist})" if self.dist else self.value


def collect(obj: Any) -> list[Workload]:
    """The workloads an entry point's object declares: a module's `WORKLOADS`, or what a callable returns."""
    if isinstance(obj, ModuleType):
        if not hasattr(obj, "WORKLOADS"):
            raise TypeError(f"module {obj.__name__} has no WORKLOADS tuple")
        items = obj.WORKLOADS
    elif callable(obj):
        items = obj()
    else:
        raise TypeError(f"{obj!r} is neither a module nor a callable")
    out = list(items or ())
    for w in out:
        if not isinstance(w, Workload):
            raise TypeError(f"{w!r} is not a workloads.spec.Workload")
    return out


class Registry:
    """Plugin workloads by name, in the order their plugins declare them. Loads the entry points on first use."""

    def __init__(self, group: str | None = ENTRY_POINT_GROUP) -> None:
        self.group = group
        self.plugin_errors: dict[str, str] = {}  # namespace -> why it was skipped
        self.sources: dict[str, Source] = {}  # namespace -> its entry point
        self._by_name: dict[str, Workload] = {}
        self._clash: WorkloadClash | None = None
        self._loaded = False

    def add(self, source: Source, workloads: Iterable[Workload]) -> None:
        """Register a namespace's workloads; all or none. WorkloadClash when the namespace or a name is taken."""
        if not NAMESPACE.fullmatch(source.namespace):
            raise WorkloadClash(f"workload plugin {source.namespace!r} ({source}): its entry point's name is the "
                                "namespace; use lower-case letters, digits and _")
        if source.namespace in self.sources:
            raise WorkloadClash(f"workload namespace {source.namespace!r} is declared twice: by "
                                f"{self.sources[source.namespace]} and by {source}; rename one entry point")
        workloads = list(workloads)
        seen: set[str] = set()
        for w in workloads:
            try:
                check_plugin_workload(w.name, source.namespace)
            except ValueError as e:
                raise WorkloadClash(f"{e} ({source})") from None
            if w.name in seen:
                raise WorkloadClash(f"workload {w.name!r} is declared twice by {source}")
            seen.add(w.name)
        self.sources[source.namespace] = source
        self._by_name.update((w.name, w) for w in workloads)

    def load(self) -> None:
        if self._loaded:
            if self._clash is not None:
                raise self._clash
            return
        self._loaded = True  # first: a plugin that asks for the workloads while loading must not recurse
        if not self.group:
            return
        for ep in entry_points(self.group):
            source = Source(ep.name, ep.value, _dist_name(ep))
            try:
                found = collect(ep.load())
            except WorkloadClash as clash:  # raised by a Workload it declares: not a broken plugin, a clash
                self._clash = WorkloadClash(f"{clash} ({source})")
                raise self._clash from None
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # a broken plugin, even one that exits on import, must not take us down
                why = failure_line(exc)
                self.plugin_errors[ep.name] = why
                warnings.warn(f"workload plugin {ep.name!r} ({ep.value}) skipped: {why}", PluginWarning,
                              stacklevel=3)
                continue
            try:
                self.add(source, found)
            except WorkloadClash as clash:
                self._clash = clash
                raise

    def reset(self) -> None:
        """Forget what was loaded, to load again on the next query (a test that puts a plugin on sys.path)."""
        self.__init__(self.group)  # type: ignore[misc]
        importlib.invalidate_caches()

    def workloads(self) -> list[Workload]:
        self.load()
        return list(self._by_name.values())

    def get(self, name: str) -> Workload:
        self.load()
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownName(f"unknown workload {name!r}; plugin workloads: {', '.join(self._by_name) or 'none'}"
                           ) from None


def _dist_name(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return dist.metadata["Name"] if dist is not None else ""


def entry_points(group: str) -> list[metadata.EntryPoint]:
    """The enabled plugins' entry points of `group`."""
    # One distribution visible twice on sys.path lists its entry points twice: keep one of each. Those that
    # COMPILE_BASELINES_PLUGINS leaves out are not loaded at all.
    return list({(ep.name, ep.value): ep for ep in metadata.entry_points(group=group)
                 if plugin_enabled(ep.name)}.values())


REGISTRY = Registry()
