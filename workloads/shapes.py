"""Shapes as data: a plugin workload's presets, one named set of dimensions each, and sweeps of them.

The study's presets (workloads.presets) hold every dimension any of the study's workloads reads. A plugin workload
brings its own: a `Shape` is a preset name and the dimensions its builder reads (`shape.seq`, `shape["seq"]`),
and `sweep` makes a family of them, one per point of a grid (`seq=128`, `seq=256`, ... or `batch=1,seq=128`).
A sweep's presets carry its axes, so the report can lay the family out as one table.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Preset names travel in cell-store paths, asv parameters and command lines: letters, digits and _ . = , + -
PRESET_NAME = re.compile(r"[A-Za-z0-9_.=,+-]+")
_DIM = re.compile(r"[a-z_][a-z0-9_]*")


@dataclass(frozen=True)
class Shape:
    """One preset of a plugin workload: its name and the dimensions its builder reads."""

    name: str
    dims: Mapping[str, int] = field(default_factory=dict)
    needs_cuda: bool = False  # too large for a CPU: the cell is skipped there, as the study's presets are
    sweep: tuple[str, ...] = ()  # the dimensions this shape's sweep varies ((): not part of a sweep)

    def __post_init__(self) -> None:
        if not PRESET_NAME.fullmatch(self.name) or not self.name.strip("."):
            raise ValueError(f"preset name {self.name!r}: use letters, digits and _ . = , + - only")
        for key, value in self.dims.items():
            if not _DIM.fullmatch(key) or key in ("name", "dims", "needs_cuda", "sweep"):
                raise ValueError(f"preset {self.name}: dimension name {key!r} is not a plain lower-case identifier "
                                 "(or is one of Shape's own fields)")
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"preset {self.name}: dimension {key} = {value!r} is not a positive int")
        object.__setattr__(self, "dims", dict(self.dims))
        unknown = [a for a in self.sweep if a not in self.dims]
        if unknown:
            raise ValueError(f"preset {self.name}: swept dimension {unknown[0]!r} is not one of its dimensions")

    def __getattr__(self, key: str) -> int:
        # Only called for names that are not fields: the dimensions, as attributes (`p.seq`, like Preset's)
        dims = self.__dict__.get("dims", {})
        if key in dims:
            return dims[key]
        raise AttributeError(f"preset {self.__dict__.get('name')!r} has no dimension {key!r}; it has "
                             f"{', '.join(dims) or 'none'}")

    def __getitem__(self, key: str) -> int:
        return self.dims[key]

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted(self.dims.items())), self.needs_cuda, self.sweep))

    @property
    def point(self) -> dict[str, int]:
        """The swept dimensions' values: this shape's place in its sweep ({} outside a sweep)."""
        return {a: self.dims[a] for a in self.sweep}


def shape(name: str, *, needs_cuda: bool = False, **dims: int) -> Shape:
    """One named preset: `shape("tiny", batch=2, seq=16, hidden=64)`."""
    return Shape(name, dims, needs_cuda)


def sweep(axes: Mapping[str, Iterable[int]], *, needs_cuda: bool = True, **fixed: int) -> tuple[Shape, ...]:
    """One preset per point of the grid `axes` (first axis outermost), named `a=1,b=2` in the axes' order, with
    the `fixed` dimensions added to each: `sweep({"batch": [1, 64], "seq": [128, 8192]}, hidden=4096)`."""
    names = list(axes)
    if not names:
        raise ValueError("a sweep needs at least one axis")
    clash = set(names) & set(fixed)
    if clash:
        raise ValueError(f"dimension {sorted(clash)[0]!r} is both swept and fixed")
    values = [list(axes[a]) for a in names]
    if any(not v for v in values):
        raise ValueError("every sweep axis needs at least one value")
    return tuple(Shape(",".join(f"{a}={v}" for a, v in zip(names, point, strict=True)),
                       {**dict(zip(names, point, strict=True)), **fixed}, needs_cuda, tuple(names))
                 for point in itertools.product(*values))


def powers_of_two(low: int, high: int) -> list[int]:
    """low, 2*low, ... up to high (inclusive): the usual sweep of a sequence length or batch size."""
    if low <= 0 or high < low:
        raise ValueError(f"powers_of_two({low}, {high}): need 0 < low <= high")
    out = [low]
    while out[-1] * 2 <= high:
        out.append(out[-1] * 2)
    return out


def describe(shapes: Iterable[Any]) -> str:
    """'tiny, 8 in a sweep over seq x batch': a short account of a workload's presets, for `list`."""
    shapes = list(shapes)
    plain = [s.name for s in shapes if not getattr(s, "sweep", ())]
    swept = [s for s in shapes if getattr(s, "sweep", ())]
    parts = list(plain)
    if swept:
        parts.append(f"{len(swept)} in a sweep over {' x '.join(swept[0].sweep)}")
    return ", ".join(parts)
