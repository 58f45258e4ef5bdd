"""What a process clears between two measurements, so that the second compiles as a fresh process would: dynamo's
caches and guards, inductor's in-memory caches (generated modules, autotuning's choices; the same registry that
inductor's own `fresh_cache` clears), the CUDA graph trees, AOT autograd's graph numbering, and the GPU memory the
first left cached. The on-disk caches are the next measurement's own (its environment names them:
tracker.runner.workerenv.cache_dirs)."""

from __future__ import annotations

import contextlib
import gc
import itertools
import sys

# The most of its GPU's memory a process may still hold once cleared (the CUDA context aside) and take another
# measurement: more means something of the last one is still alive, which the next would time beside.
MAX_LEFT_BYTES = 256 * 2**20


def clear() -> int | None:
    """Clear this process's compiler state and cached GPU memory; the bytes its allocator still holds after (None on a
    process without CUDA)."""
    import torch

    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()
    if "torch._inductor" in sys.modules:
        with contextlib.suppress(Exception):  # internals differ between torch versions
            from torch._inductor import utils

            (getattr(utils, "clear_caches", None) or utils.clear_inductor_caches)()
        with contextlib.suppress(Exception):
            from torch._inductor import cudagraph_trees

            cudagraph_trees.reset_cudagraph_trees()
    if "torch._functorch.aot_autograd" in sys.modules:
        # It numbers a process's graphs, and the generated code names its graph by it (fingerprint.py hashes that)
        sys.modules["torch._functorch.aot_autograd"].AOT_COUNTER = itertools.count()
    gc.collect()
    if not torch.cuda.is_initialized():
        return None
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return int(torch.cuda.memory_reserved())


def fit_for_another(left_bytes: int | None) -> bool:
    """Whether a process holding `left_bytes` once cleared may take another measurement."""
    return left_bytes is None or left_bytes <= MAX_LEFT_BYTES
