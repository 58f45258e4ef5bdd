"""Diffusion workloads: docs/workloads.md rows diff_*."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from workloads.presets import Preset
from workloads.spec import Built, Workload
from workloads.tensors import BF16
from workloads.tensors import randn as _randn


def unet_resblock(x: torch.Tensor, skip: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    h = F.group_norm(x, 32)
    h = F.silu(F.conv2d(h, w1, padding=1))
    return F.conv2d(h, w2, padding=1) + skip


def vae_decoder_upsample(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    h = F.interpolate(x, scale_factor=2.0, mode="nearest")
    return F.conv2d(F.silu(F.conv2d(h, w1, padding=1)), w2, padding=1)


def time_embedding_mlp(t: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    half = w1.shape[0] // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = t[:, None] * freqs[None, :]
    emb = torch.cat((torch.sin(args), torch.cos(args)), dim=-1).to(BF16)
    return F.silu(emb @ w1) @ w2


def cfg_blend(uncond: torch.Tensor, cond: torch.Tensor, scale: float) -> torch.Tensor:
    return uncond + scale * (cond - uncond)


def scheduler_step(latents: torch.Tensor, noise: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    return latents - sigma[:, None, None, None] * noise


def _build_resblock(p: Preset, d: torch.device) -> Built:
    c, m = p.unet_channels, p.unet_map
    x, skip = _randn(p.diff_batch, c, m, m, device=d), _randn(p.diff_batch, c, m, m, device=d)
    return unet_resblock, (x, skip, _randn(c, c, 3, 3, device=d), _randn(c, c, 3, 3, device=d)), {}


def _build_vae(p: Preset, d: torch.device) -> Built:
    c = p.vae_channels
    x = _randn(p.diff_batch, c, p.vae_map, p.vae_map, device=d)
    return vae_decoder_upsample, (x, _randn(c, c, 3, 3, device=d), _randn(p.vae_out_channels, c, 3, 3, device=d)), {}


def _build_time(p: Preset, d: torch.device) -> Built:
    t = torch.rand(p.diff_batch, device=d, dtype=torch.float32)
    return time_embedding_mlp, (t, _randn(p.time_dim, p.time_hidden, device=d),
                                _randn(p.time_hidden, p.time_hidden, device=d)), {}


def _latents(p: Preset, d: torch.device) -> torch.Tensor:
    return _randn(p.diff_batch, 4, p.latent_map, p.latent_map, device=d)


def _build_cfg(p: Preset, d: torch.device) -> Built:
    return cfg_blend, (_latents(p, d), _latents(p, d), 7.5), {}


def _build_step(p: Preset, d: torch.device) -> Built:
    latents, noise = _latents(p, d), _latents(p, d)
    return scheduler_step, (latents, noise, torch.rand(p.diff_batch, device=d, dtype=BF16)), {}


def _conv_flops(batch: int, cin: int, cout: int, side: int) -> float:
    return 2.0 * batch * cout * side * side * cin * 9


WORKLOADS = (
    Workload("diff_unet_resblock", "diffusion", ("conv", "norm"), _build_resblock,
             lambda p: 2 * _conv_flops(p.diff_batch, p.unet_channels, p.unet_channels, p.unet_map)),
    Workload("diff_vae_decoder_upsample", "diffusion", ("conv",), _build_vae,
             lambda p: _conv_flops(p.diff_batch, p.vae_channels, p.vae_channels, 2 * p.vae_map)
             + _conv_flops(p.diff_batch, p.vae_channels, p.vae_out_channels, 2 * p.vae_map),
             decode_invariant=True),
    Workload("diff_time_embedding_mlp", "diffusion", ("gemm", "small"), _build_time,
             lambda p: 2.0 * p.diff_batch * (p.time_dim * p.time_hidden + p.time_hidden**2),
             decode_invariant=True),
    Workload("diff_cfg_blend", "diffusion", ("elementwise", "memory-bound"), _build_cfg,
             lambda p: 3.0 * p.diff_batch * 4 * p.latent_map**2),
    Workload("diff_scheduler_step", "diffusion", ("elementwise", "memory-bound"), _build_step,
             lambda p: 2.0 * p.diff_batch * 4 * p.latent_map**2),
)
