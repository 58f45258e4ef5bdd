"""The contract every workload follows: a name, a domain, tags, and a builder of (fn, args, kwargs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workloads.names import DECODE_INVARIANT, applies, domain_of
from workloads.presets import Preset

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

    def __post_init__(self) -> None:
        if self.domain != domain_of(self.name):
            raise ValueError(f"{self.name}: domain {self.domain!r} disagrees with its name's ({domain_of(self.name)})")
        if self.decode_invariant != (self.name in DECODE_INVARIANT):
            raise ValueError(f"{self.name}: decode_invariant disagrees with workloads.names.DECODE_INVARIANT")

    def build(self, preset: Preset, device: Any = "cpu") -> Built:
        """Inputs for `preset` on `device`, seeded with torch.manual_seed(0) as in the study."""
        import torch

        torch.manual_seed(0)
        return self.builder(preset, torch.device(device))

    def min_bytes(self, preset: Preset) -> int:
        """Bytes a perfect kernel must move: every input read once, every output written once.

        Computed on the meta device, so it follows the builder exactly and allocates nothing."""
        import torch

        fn, args, kwargs = self.build(preset, "meta")
        outs = fn(*args, **kwargs)
        tensors = [*args, *kwargs.values(), *(outs if isinstance(outs, tuple) else (outs,))]
        return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))

    def applies_to(self, preset_name: str) -> bool:
        """Whether the study measures this workload in this preset (decode skips the invariant five)."""
        return applies(preset_name, self.name)
