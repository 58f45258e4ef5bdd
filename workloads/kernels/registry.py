"""The registry of kernels under test ("candidates"): a user's own implementation of a workload.

A candidate is a callable with its workload's signature (the same args and kwargs as the workload's fn),
declared with the `@candidate` decorator. Declaring has no side effect: the decorator attaches a
`Candidate` record to the function, and the registry collects the records from modules on first use:
the in-tree modules of this package, then every module (or callable) named by an entry point of the
group `compile_baselines.kernels`, so a kernel repository plugs its kernels in without forking.

Imports nothing heavy (no torch, no triton): the asv suite reads the candidate list at import.
"""

from __future__ import annotations

import importlib
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

from workloads.catalog import check_workload
from workloads.errors import UnknownName, failure_line
from workloads.plugins import entry_points

ENTRY_POINT_GROUP = "compile_baselines.kernels"
MODE_PREFIX = "kernel:"  # a candidate's cell is (preset, workload, "kernel:<name>")
DEVICES = ("cpu", "cuda")  # the device types the harness measures on
# In-tree candidate modules, collected like plugins.
BUILTIN_MODULES: tuple[str, ...] = (
    "workloads.kernels.reference", "workloads.kernels.triton_rmsnorm", "workloads.kernels.triton_cfg_blend")
# Names travel in cell keys, file names and asv parameter strings ("workload:name"): keep them plain.
_NAME = re.compile(r"[A-Za-z0-9_.+-]+")
_ATTR = "__compile_baselines_candidate__"

F = TypeVar("F", bound=Callable[..., Any])


class PluginWarning(UserWarning):
    """A kernel plugin failed to load; its candidates are left out and the rest go on."""


@dataclass(frozen=True)
class Candidate:
    workload: str
    name: str
    fn: Callable[..., Any] = field(repr=False, compare=False)
    devices: tuple[str, ...] = ("cuda",)
    enabled: bool = True  # False where an optional dependency is missing (TritonBench's enabled=HAS_X)
    disabled_reason: str = ""
    source: str = ""  # module.qualname of fn: tells a re-import of the same code from a name clash

    @property
    def mode(self) -> str:
        """The mode of this candidate's cells."""
        return MODE_PREFIX + self.name

    @property
    def key(self) -> str:
        """`workload:name`, unique in the registry (the asv parameter of the Candidate benchmark)."""
        return f"{self.workload}:{self.name}"

    def skip_reason(self, device: str) -> str | None:
        """Why a cell of this candidate on `device` is skipped, or None when it can run."""
        if device not in self.devices:
            return f"candidate {self.key} runs on {', '.join(self.devices)} only, not on {device}"
        if not self.enabled:
            return f"candidate {self.key} is disabled: {self.disabled_reason or 'enabled=False'}"
        return None


def candidate(workload: str, name: str | None = None, devices: Iterable[str] = ("cuda",), enabled: bool = True,
              disabled_reason: str = "") -> Callable[[F], F]:
    """Declare the decorated function a candidate implementation of `workload` (name: the function's)."""
    devices = tuple(devices)

    def declare(fn: F) -> F:
        c = Candidate(workload, name or fn.__name__, fn, devices, enabled, disabled_reason,
                      f"{fn.__module__}.{fn.__qualname__}")
        _validate(c)
        setattr(fn, _ATTR, c)
        return fn

    return declare


def _validate(c: Candidate) -> None:
    check_workload(c.workload)
    if not _NAME.fullmatch(c.name):
        raise ValueError(f"candidate name {c.name!r}: use letters, digits and _ . + - only")
    unknown = [d for d in c.devices if d not in DEVICES]
    if not c.devices or unknown:
        raise ValueError(f"candidate {c.key}: devices must be among {', '.join(DEVICES)}, got {c.devices}")


def declared(obj: Any) -> Candidate | None:
    """The Candidate record of a decorated function (or a Candidate itself), else None."""
    return obj if isinstance(obj, Candidate) else getattr(obj, _ATTR, None)


def collect(obj: Any) -> list[Candidate]:
    """The candidates an entry point's object declares.

    A module: its decorated functions. A decorated function: itself. Another callable: called with no
    arguments, it returns decorated functions or Candidates (for registration that depends on the host)."""
    if isinstance(obj, ModuleType):
        found = [declared(v) for v in vars(obj).values()]
        return list(dict.fromkeys(c for c in found if c is not None))  # a function imported twice counts once
    if declared(obj) is not None:
        return [declared(obj)]
    if callable(obj):
        out = []
        for item in obj() or ():
            c = declared(item)
            if c is None:
                raise TypeError(f"{obj!r} returned {item!r}, which is not a @candidate function")
            _validate(c)
            out.append(c)
        return out
    raise TypeError(f"{obj!r} is neither a module nor a callable")


class Registry:
    """Candidates by (workload, name). Loads the in-tree modules and the plugins once, on first use."""

    def __init__(self, modules: Iterable[str] = BUILTIN_MODULES, group: str | None = ENTRY_POINT_GROUP) -> None:
        self.modules, self.group = tuple(modules), group
        self.plugin_errors: dict[str, str] = {}  # entry point name -> why it was skipped
        self._by_key: dict[tuple[str, str], Candidate] = {}
        self._loaded = False

    def add(self, *items: Any) -> None:
        """Register decorated functions or Candidates; all or none (a clash leaves the registry unchanged)."""
        cands = [c for item in items for c in collect(item)]
        seen: dict[tuple[str, str], Candidate] = {}
        for c in cands:
            k = (c.workload, c.name)
            old = seen.get(k) or self._by_key.get(k)
            if old is not None and old.source != c.source:  # same source: a re-import of the same code
                raise ValueError(f"candidate {c.key} is declared twice: by {old.source} and by {c.source}")
            seen[k] = c
        self._by_key.update(seen)

    def remove(self, workload: str, name: str) -> None:
        self._by_key.pop((workload, name), None)

    def load(self) -> None:
        """Collect the in-tree modules (errors propagate: they are ours) and the plugins (errors warn)."""
        if self._loaded:
            return
        self._loaded = True  # first: a plugin that queries the registry while loading must not recurse
        try:
            for mod in self.modules:
                self.add(importlib.import_module(mod))
        except BaseException:
            self._loaded = False  # our own bug: raise again on the next query, never serve half a registry
            raise
        if self.group:
            for ep in entry_points(self.group):
                try:
                    self.add(ep.load())
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:  # a broken plugin, even one that exits on import, must not take us down
                    why = failure_line(exc)
                    self.plugin_errors[ep.name] = why
                    warnings.warn(f"kernel plugin {ep.name!r} ({ep.value}) skipped: {why}", PluginWarning,
                                  stacklevel=3)

    def reset(self) -> None:
        """Forget what was loaded, to load again on the next query (a test that puts a plugin on sys.path)."""
        self.__init__(self.modules, self.group)  # type: ignore[misc]

    def candidates(self, workload: str | None = None) -> list[Candidate]:
        """Registered candidates, ordered by workload then name; those of `workload` only when given."""
        self.load()
        if workload is not None:
            check_workload(workload)
        return sorted((c for c in self._by_key.values() if workload in (None, c.workload)),
                      key=lambda c: (c.workload, c.name))

    def get(self, workload: str, name: str) -> Candidate:
        self.load()
        check_workload(workload)
        try:
            return self._by_key[(workload, name)]
        except KeyError:
            known = ", ".join(c.name for c in self.candidates(workload)) or "none"
            raise UnknownName(f"unknown candidate {name!r} for {workload}; registered: {known}") from None


REGISTRY = Registry()


def candidates(workload: str | None = None) -> list[Candidate]:
    return REGISTRY.candidates(workload)


def get(workload: str, name: str) -> Candidate:
    return REGISTRY.get(workload, name)


def mode_of(name: str) -> str:
    return MODE_PREFIX + name


def candidate_name(mode: str) -> str | None:
    """The candidate name of a `kernel:<name>` mode; None for the compile modes."""
    return mode.removeprefix(MODE_PREFIX) if mode.startswith(MODE_PREFIX) else None


def split_key(key: str) -> tuple[str, str]:
    """`workload:name` -> (workload, name)."""
    workload, sep, name = key.partition(":")
    if not sep or not name:
        raise UnknownName(f"candidate {key!r}: expected workload:name, e.g. llm_rmsnorm:triton_rmsnorm")
    return workload, name
