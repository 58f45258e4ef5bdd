"""Reinforcement-learning losses: docs/workloads.md rows rl_*."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from workloads.presets import Preset
from workloads.spec import Built, Workload
from workloads.tensors import randn as _randn


def ppo_clipped_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, eps: float = 0.2) -> torch.Tensor:
    r = torch.exp(logp - old_logp)
    return -torch.mean(torch.minimum(r * adv, torch.clamp(r, 1 - eps, 1 + eps) * adv))


def dpo_loss(chosen: torch.Tensor, rejected: torch.Tensor, ref_chosen: torch.Tensor,
             ref_rejected: torch.Tensor) -> torch.Tensor:
    return -torch.mean(F.logsigmoid(0.1 * ((chosen - ref_chosen) - (rejected - ref_rejected))))


def grpo_loss(logp: torch.Tensor, old_logp: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
    r = rewards.view(-1, 8)
    adv = ((r - r.mean(dim=1, keepdim=True)) / (r.std(dim=1, keepdim=True) + 1e-8)).flatten()
    return ppo_clipped_loss(logp, old_logp, adv, eps=0.2)


def _build_ppo(p: Preset, d: torch.device) -> Built:
    n = p.tokens
    return ppo_clipped_loss, (_randn(n, device=d), _randn(n, device=d), _randn(n, device=d)), {}


def _build_dpo(p: Preset, d: torch.device) -> Built:
    return dpo_loss, tuple(_randn(p.rl_pairs, device=d) for _ in range(4)), {}


def _build_grpo(p: Preset, d: torch.device) -> Built:
    return grpo_loss, tuple(_randn(p.rl_pairs, device=d) for _ in range(3)), {}


WORKLOADS = (
    Workload("rl_ppo_clipped_loss", "rl", ("loss", "elementwise", "reduction"), _build_ppo,
             lambda p: 8.0 * p.tokens),
    Workload("rl_dpo_loss", "rl", ("loss", "small"), _build_dpo, lambda p: 8.0 * p.rl_pairs,
             decode_invariant=True),
    Workload("rl_grpo_loss", "rl", ("loss", "small"), _build_grpo, lambda p: 16.0 * p.rl_pairs,
             decode_invariant=True),
)
