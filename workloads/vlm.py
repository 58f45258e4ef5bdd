"""Vision-language workloads: docs/workloads.md rows vlm_*."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from workloads.llm import rmsnorm
from workloads.presets import Preset
from workloads.spec import Built, Workload
from workloads.tensors import randn as _randn


def patch_embedding_conv2d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.conv2d(x, w, stride=w.shape[-1]).flatten(2).transpose(1, 2)


def vit_mlp_block(x: torch.Tensor, ln_w: torch.Tensor, ln_b: torch.Tensor, w1: torch.Tensor,
                  w2: torch.Tensor) -> torch.Tensor:
    h = F.layer_norm(x, (x.shape[-1],), ln_w, ln_b, eps=1e-5)
    return x + F.gelu(h @ w1, approximate="tanh") @ w2


def vision_rmsnorm_pool(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return rmsnorm(x, w).mean(dim=1)


def contrastive_nce_loss(image: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
    i, t = F.normalize(image, dim=-1), F.normalize(text, dim=-1)
    logits = i @ t.T / 0.07
    labels = torch.arange(logits.shape[0], device=logits.device)
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


def _build_patch(p: Preset, d: torch.device) -> Built:
    x = _randn(p.vlm_batch, 3, p.vlm_image, p.vlm_image, device=d)
    return patch_embedding_conv2d, (x, _randn(p.vlm_embed, 3, p.vlm_patch, p.vlm_patch, device=d)), {}


def _build_vit(p: Preset, d: torch.device) -> Built:
    e = p.vlm_embed
    x = _randn(p.vlm_batch, p.vlm_tokens, e, device=d)
    args = (x, _randn(e, device=d), _randn(e, device=d), _randn(e, 4 * e, device=d), _randn(4 * e, e, device=d))
    return vit_mlp_block, args, {}


def _build_pool(p: Preset, d: torch.device) -> Built:
    x = _randn(p.vlm_batch, p.vlm_tokens, p.vlm_embed, device=d)
    return vision_rmsnorm_pool, (x, _randn(p.vlm_embed, device=d)), {}


def _build_nce(p: Preset, d: torch.device) -> Built:
    n, e = p.contrastive_pairs, p.vlm_embed
    return contrastive_nce_loss, (_randn(n, e, device=d), _randn(n, e, device=d)), {}


def _patches(p: Preset) -> int:
    return (p.vlm_image // p.vlm_patch) ** 2


WORKLOADS = (
    Workload("vlm_patch_embedding_conv2d", "vlm", ("conv", "gemm"), _build_patch,
             lambda p: 2.0 * p.vlm_batch * _patches(p) * p.vlm_embed * 3 * p.vlm_patch**2),
    Workload("vlm_vit_mlp_block", "vlm", ("gemm", "norm"), _build_vit,
             lambda p: 2 * 2.0 * p.vlm_batch * p.vlm_tokens * p.vlm_embed * 4 * p.vlm_embed),
    Workload("vlm_vision_rmsnorm_pool", "vlm", ("norm", "reduction", "memory-bound"), _build_pool,
             lambda p: 5.0 * p.vlm_batch * p.vlm_tokens * p.vlm_embed),
    Workload("vlm_contrastive_nce_loss", "vlm", ("loss", "gemm"), _build_nce,
             lambda p: 2.0 * p.contrastive_pairs**2 * p.vlm_embed + 10.0 * p.contrastive_pairs**2,
             decode_invariant=True),
)
