"""Input tensors as the study draws them: plain N(0, 1) in bf16 on the target device."""

from __future__ import annotations

import torch

BF16 = torch.bfloat16


def randn(*shape: int, device: torch.device) -> torch.Tensor:
    return torch.randn(*shape, device=device, dtype=BF16)
