"""The repository's kernels under test for `example.add_rmsnorm`: a Triton kernel, and its PyTorch twin.

The Triton kernel runs on CUDA only: on a CPU host (no triton) the module still imports and its cells are
skipped with the reason. `torch_fp32` (the same arithmetic in PyTorch: fp32 accumulation) runs anywhere, so a
CPU run measures a candidate end to end.
"""

from __future__ import annotations

import torch

from workloads.kernels import candidate

try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:  # a CPU-only build of torch ships without triton
    HAS_TRITON = False

if HAS_TRITON:

    @triton.jit
    def _add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, out_ptr, h_ptr, n_cols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        offs = row * n_cols + cols
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        r = tl.load(r_ptr + offs, mask=mask, other=0.0)
        h = x + r  # bf16 + bf16 -> bf16, as the workload rounds h before normalising it
        tl.store(h_ptr + offs, h, mask=mask)
        hf = h.to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / n_cols + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + offs, (hf * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


@candidate(workload="example.add_rmsnorm", name="triton_add_rmsnorm", devices=("cuda",), enabled=HAS_TRITON,
           disabled_reason="triton is not installed")
def triton_add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n_cols = x.shape[-1]
    out, h = torch.empty_like(x), torch.empty_like(x)
    _add_rmsnorm_kernel[(x.numel() // n_cols,)](x, residual, w, out, h, n_cols, 1e-6,
                                                BLOCK=triton.next_power_of_2(n_cols))
    return out, h


@candidate(workload="example.add_rmsnorm", name="torch_fp32", devices=("cpu", "cuda"))
def add_rmsnorm_fp32(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    h = x + residual
    hf = h.float()
    out = hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    return out.to(x.dtype), h
