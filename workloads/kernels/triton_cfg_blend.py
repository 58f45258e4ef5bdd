"""diff_cfg_blend in Triton: a 1-D elementwise kernel, u + scale * (c - u), scale a runtime float.

The template for elementwise work: contiguous inputs are blended as flat arrays, BLOCK elements per
program, the grid computed from BLOCK by a lambda. Triton is imported under a guard, as in triton_rmsnorm.
"""

from __future__ import annotations

import torch

from workloads.kernels.registry import candidate

try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:
    HAS_TRITON = False

BLOCK = 1024  # elements per program: 4 warps x 32 threads x 8 bf16 (one 16-byte load each)

if HAS_TRITON:

    @triton.jit
    def _cfg_blend(u_ptr, c_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n  # the last program may run past the end
        u = tl.load(u_ptr + offs, mask=mask).to(tl.float32)
        c = tl.load(c_ptr + offs, mask=mask).to(tl.float32)
        # scale is a plain float argument, not a constexpr: another guidance scale needs no recompile.
        out = u + scale * (c - u)
        tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


@candidate(workload="diff_cfg_blend", name="triton_cfg_blend", devices=("cuda",), enabled=HAS_TRITON,
           disabled_reason="triton is not installed")
def triton_cfg_blend(uncond: torch.Tensor, cond: torch.Tensor, scale: float) -> torch.Tensor:
    u, c = uncond.contiguous(), cond.contiguous()  # flat indexing needs contiguous memory
    out = torch.empty_like(u)
    n = u.numel()
    _cfg_blend[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](u, c, out, n, float(scale), BLOCK=BLOCK)
    return out
