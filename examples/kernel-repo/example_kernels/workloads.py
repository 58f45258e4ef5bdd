"""The repository's workloads: what compile-baselines measures in eager and the four compile modes.

`example.add_rmsnorm` is the fused residual add + RMSNorm of every pre-norm transformer block: h = x + residual,
then RMSNorm(h) * w; both h (the next residual) and the normalised output are returned. It is written the way
the study writes its workloads: bf16 throughout, no upcast. Its presets are a `tiny` one that a CPU measures in
seconds and a sweep over batch x sequence length at the study's hidden size, on a GPU.
"""

from __future__ import annotations

import torch

from workloads.shapes import shape, sweep
from workloads.spec import Built, Workload


def add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    h = x + residual
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w, h


def _build(p, device: torch.device) -> Built:  # p: a workloads.shapes.Shape (p.batch, p.seq, p.hidden)
    x = torch.randn(p.batch, p.seq, p.hidden, device=device, dtype=torch.bfloat16)
    residual = torch.randn(p.batch, p.seq, p.hidden, device=device, dtype=torch.bfloat16)
    w = torch.randn(p.hidden, device=device, dtype=torch.bfloat16)
    return add_rmsnorm, (x, residual, w), {}


def _elements(p) -> int:
    return p.batch * p.seq * p.hidden


PRESETS = (
    shape("tiny", batch=2, seq=16, hidden=64),
    *sweep({"batch": [1, 64], "seq": [128, 512, 2048, 8192]}, hidden=2048),
)

WORKLOADS = (
    Workload("example.add_rmsnorm", "llm", ("norm", "memory-bound", "fused"), _build,
             flops=lambda p: 6.0 * _elements(p),  # add, square, mean, rsqrt-scale, weight: ~6 per element
             presets=PRESETS,
             # x and residual read, h and the output written (bf16), w read once
             bytes_moved=lambda p: 2.0 * (4 * _elements(p) + p.hidden)),
)
