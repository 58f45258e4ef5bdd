"""The contract every workload follows: a name, a domain, tags, and a builder of (fn, args, kwargs).

The study's workloads read the study's presets (workloads.presets). A plugin's workload (`namespace.name`,
workloads.plugins) declares its own presets (workloads.shapes) and is otherwise the same contract: the harness,
the store, the analysis and the reports treat both alike."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workloads.errors import UnknownName, WorkloadClash
from workloads.names import DECODE_INVARIANT, PRESET_NAMES, applies, domain_of, is_plugin_workload
from workloads.presets import Preset, get_preset
from workloads.shapes import Shape

_DOMAIN = re.compile(r"[a-z][a-z0-9_-]*")

# fn(*args, **kwargs) is the timed call; args are built once, outside the timed region.
Built = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


@dataclass(frozen=True)
class Workload:
    name: str
    domain: str
    tags: tuple[str, ...]
    # builder(preset, device) -> (fn, args, kwargs); it draws inputs from the global RNG, which
    # `build` seeds, so the same preset gives the same inputs on the same device type.
    builder: Callable[[Preset, Any], Built] = field(repr=False)
    # flops(preset) -> floating-point operations of one call (multiply-add = 2), for % of peak.
    flops: Callable[[Preset], float] = field(repr=False)
    # Same shapes in decode as in prefill: the study measures these in prefill only.
    decode_invariant: bool = False
    # A plugin workload's own presets (the study's workloads leave it empty: they read workloads.presets).
    presets: tuple[Shape, ...] = ()
    # bytes(preset) -> bytes a perfect kernel must move, where the meta-device count (min_bytes) is not the
    # right one (inputs read twice, say); None: counted from the builder's tensors.
    bytes_moved: Callable[[Any], float] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "presets", tuple(self.presets))
        if is_plugin_workload(self.name):
            self._check_plugin()
            return
        if self.presets:  # a plugin's workload that forgot its namespace: its cells would pass for the study's
            raise WorkloadClash(f"workload {self.name!r} has presets of its own, so it is a plugin's: name it "
                                f"<namespace>.{self.name} (names without a namespace are the study's)")
        if self.domain != domain_of(self.name):
            raise ValueError(f"{self.name}: domain {self.domain!r} disagrees with its name's ({domain_of(self.name)})")
        if self.decode_invariant != (self.name in DECODE_INVARIANT):
            raise ValueError(f"{self.name}: decode_invariant disagrees with workloads.names.DECODE_INVARIANT")

    def _check_plugin(self) -> None:
        if not _DOMAIN.fullmatch(self.domain):
            raise ValueError(f"{self.name}: domain {self.domain!r} is not a lower-case word (e.g. llm, attention)")
        if self.decode_invariant:
            raise ValueError(f"{self.name}: decode_invariant is the study's; a plugin lists the presets it has")
        if not self.presets or not all(isinstance(p, Shape) for p in self.presets):
            raise ValueError(f"{self.name}: declare its presets (workloads.shapes.shape / sweep), at least one")
        names = [p.name for p in self.presets]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"{self.name}: preset {dup[0]!r} is declared twice")

    @property
    def is_plugin(self) -> bool:
        return bool(self.presets)

    def preset(self, name: str) -> Preset | Shape:
        """The shapes of preset `name` for this workload (KeyError naming the presets it has)."""
        if not self.presets:
            return get_preset(name)
        for p in self.presets:
            if p.name == name:
                return p
        raise UnknownName(f"unknown preset {name!r} for {self.name}; it has {', '.join(p.name for p in self.presets)}")

    def build(self, preset: Preset | Shape, device: Any = "cpu") -> Built:
        """Inputs for `preset` on `device`, seeded with torch.manual_seed(0) as in the study."""
        import torch

        torch.manual_seed(0)
        return self.builder(preset, torch.device(device))

    def min_bytes(self, preset: Preset | Shape) -> int:
        """Bytes a perfect kernel must move: every input read once, every output written once.

        Computed on the meta device (`tensor_bytes`), unless the workload declares its own count (`bytes_moved`)."""
        if self.bytes_moved is not None:
            return int(self.bytes_moved(preset))
        return self.tensor_bytes(preset)

    def tensor_bytes(self, preset: Preset | Shape) -> int:
        """Bytes of one call's inputs and outputs: the least memory a cell of `preset` takes. Counted on the meta
        device, so it follows the builder exactly and allocates nothing; whatever the builder or the function
        raises there propagates (a plugin's builder may not support the meta device)."""
        import torch

        fn, args, kwargs = self.build(preset, "meta")
        outs = fn(*args, **kwargs)
        tensors = [*args, *kwargs.values(), *(outs if isinstance(outs, tuple) else (outs,))]
        return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))

    def not_measured_in(self, preset_name: str) -> str | None:
        """Why this workload has no cell in `preset_name`, or None when it has one."""
        if self.applies_to(preset_name):
            return None
        if self.presets:
            return f"{self.name} has no preset {preset_name} (it has {', '.join(p.name for p in self.presets)})"
        if self.decode_invariant and preset_name == "decode":
            return f"{self.name} is decode-invariant: the study measures it in prefill only"
        return f"{self.name} is one of the study's workloads: it has the study's presets only"

    def applies_to(self, preset_name: str) -> bool:
        """Whether this workload is measured in this preset: a plugin's in the presets it declares; the study's
        in its three (decode skips the invariant five)."""
        if self.presets:
            return any(p.name == preset_name for p in self.presets)
        return preset_name in PRESET_NAMES and applies(preset_name, self.name)
