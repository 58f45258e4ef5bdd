"""What a compiled cell ran, as short hashes: the code inductor generated and the configs autotuning chose.

Two compiles of the same source under the same torch can run different kernels: max-autotune benchmarks
candidate configs while the process (and its neighbours) run, and picks what was fastest then. A time that
moved with its fingerprint moved because the compiled code changed; one that moved with the same fingerprint
is the same code timed differently. The comparison reads them to say which (tracker.analyse.compare).

- `code`: the generated wrapper modules this process loaded (their sources hold every generated kernel, C++ or
  Triton, and the templates max-autotune selected), hashed in a stable order.
- `autotune`: the launch config each Triton kernel settled on after warm-up (block sizes, warps, stages: what
  autotuning chose, or a warm cache remembered); None without Triton kernels (the CPU).
- `cudagraphs`: whether the compiled function replayed CUDA graphs (the cudagraph tree manager holds a graph).

Read after the timed calls, over the modules loaded since the cell began (each cell of a run is a fresh
process; within one process, a source compiled twice loads once, and its second cell gets no fingerprint).
Never raises: a torch without these internals gives no fingerprint, not a failed cell.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

DIGITS = 12  # hex digits kept: enough to tell compiles of one cell apart
# What differs between compiles of the same code: the compile cache's location (each cell of a cold run has its
# own, and inductor names its files in comments and strings) and object addresses in reprs.
_PATH = re.compile(r"(?<![\w.])/(?:[\w.+-]+/)+[\w.+-]*")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def normalised(text: str) -> str:
    """`text` without what varies between identical compiles: absolute paths and object addresses."""
    return _ADDRESS.sub("", _PATH.sub("<path>", text))


def _digest(parts: list[str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:DIGITS]


def _sources(modules: list[Any]) -> list[str]:
    out = []
    for module in modules:
        path = getattr(module, "__file__", None)
        if path:
            with open(path, encoding="utf-8") as f:
                out.append(normalised(f.read()))
    return sorted(out)


def _launch_configs(modules: list[Any]) -> list[str]:
    """'kernel: config' for every Triton kernel: after its first calls, autotuning has narrowed its launchers to
    the config it chose (or the one a warm cache remembered)."""
    out = []
    for module in modules:
        for name, obj in sorted(vars(module).items()):
            launchers = getattr(obj, "launchers", None)
            if isinstance(launchers, list) and launchers:
                out.append(normalised(f"{name}: " + "; ".join(str(getattr(x, "config", "?")) for x in launchers)))
    return out


def loaded_modules() -> frozenset[int]:
    """The generated modules loaded so far (their ids), to leave out of a later fingerprint."""
    try:
        from torch._inductor.codecache import PyCodeCache

        return frozenset(id(m) for m in PyCodeCache.modules)
    except Exception:
        return frozenset()


def compiled_fingerprint(before: frozenset[int] = frozenset()) -> dict[str, Any] | None:
    """The fingerprint of what this process compiled since `before` (loaded_modules()), or None when inductor
    generated nothing new."""
    try:
        from torch._inductor.codecache import PyCodeCache

        modules = [m for m in PyCodeCache.modules if id(m) not in before]
        if not modules:
            return None
        sources = _sources(modules)
        configs = _launch_configs(modules)
        return {"code": _digest(sources), "autotune": _digest(configs) if configs else None,
                "modules": len(sources), "triton_kernels": len(configs), "cudagraphs": _cudagraphs()}
    except Exception:  # internals differ between torch versions: no fingerprint, never a failed cell
        return None


def _cudagraphs() -> bool:
    try:
        import torch

        if not torch.cuda.is_available():
            return False
        from torch._inductor import cudagraph_trees

        container = cudagraph_trees.get_obj(cudagraph_trees.local, "tree_manager_containers") or {}
        return any(getattr(c, "tree_manager", None) is not None for c in container.values())
    except Exception:
        return False
