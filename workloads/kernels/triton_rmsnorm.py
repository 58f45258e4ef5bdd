"""llm_rmsnorm in Triton: one program per row, bf16 in and out, fp32 accumulation.

A template to copy: a @triton.jit kernel, a wrapper with the workload's signature that launches it, and
@candidate on the wrapper. Triton is imported under a guard (TritonBench's HAS_X with enabled=), so this
module imports on a CPU-only host, where the candidate's cells are skipped with the reason.
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

EPS = 1e-6  # the workload's

if HAS_TRITON:

    @triton.jit
    def _rmsnorm_rows(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
        # One program normalises one row; BLOCK >= n_cols, so the whole row sits in registers.
        row = tl.program_id(0).to(tl.int64)  # int64: row * n_cols passes 2**31 for large inputs
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        # Masked lanes load 0 and add nothing to the sum of squares.
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        # fp32 throughout, one rounding at the store: closer to the exact result than the bf16 workload,
        # and within compare_outputs' bf16 tolerance of it (reference.rmsnorm_fp32 checks that on CPU).
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        y = x * rstd * w
        tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@candidate(workload="llm_rmsnorm", name="triton_rmsnorm", devices=("cuda",), enabled=HAS_TRITON,
           disabled_reason="triton is not installed")
def triton_rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    rows = x.reshape(-1, n_cols).contiguous()  # a view for the workload's contiguous [b, s, h]
    out = torch.empty_like(rows)
    block = triton.next_power_of_2(n_cols)
    # About 8 elements per thread: 8 warps for h = 2048, 1 warp for small rows.
    num_warps = min(max(block // 256, 1), 8)
    _rmsnorm_rows[(rows.shape[0],)](rows, w.contiguous(), out, n_cols, EPS, BLOCK=block, num_warps=num_warps)
    return out.view(x.shape)
