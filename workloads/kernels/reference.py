"""Pure-PyTorch candidates: they run anywhere (CPU included), so tests and CPU runs exercise the candidate
path end to end, and on a GPU they are the control row (a candidate that is eager by another name)."""

from __future__ import annotations

import torch

from workloads.kernels.registry import candidate


@candidate(workload="llm_rmsnorm", name="torch_fp32", devices=("cpu", "cuda"))
def rmsnorm_fp32(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # The Triton kernel's arithmetic (fp32 accumulation, one rounding at the end) in PyTorch: it shows on
    # any host that computing more precisely than the bf16 workload stays within compare_outputs' tolerance.
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


@candidate(workload="diff_cfg_blend", name="torch_lerp", devices=("cpu", "cuda"))
def cfg_blend_lerp(uncond: torch.Tensor, cond: torch.Tensor, scale: float) -> torch.Tensor:
    # u + s * (c - u) is lerp(u, c, s); torch.lerp accepts weights outside [0, 1].
    return torch.lerp(uncond, cond, scale)
