"""LLM workloads (including the CE and KL losses): docs/workloads.md rows llm_*."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from workloads.presets import Preset
from workloads.spec import Built, Workload
from workloads.tensors import BF16
from workloads.tensors import randn as _randn


def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # bf16 throughout, no upcast, as the study wrote it
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def layernorm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def swiglu_mlp(x: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor, wd: torch.Tensor) -> torch.Tensor:
    return (F.silu(x @ wg) * (x @ wu)) @ wd


def gelu_mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return F.gelu(x @ w1, approximate="tanh") @ w2


def rope_apply(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    xe, xo = x[..., 0::2], x[..., 1::2]
    c = cos[None, :, None, ::2]
    s = sin[None, :, None, ::2]
    out = torch.empty_like(x)
    out[..., 0::2] = xe * c - xo * s
    out[..., 1::2] = xe * s + xo * c
    return out


def logits_projection_softmax(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x @ w, dim=-1)


def topk_sampling_prep(logits: torch.Tensor) -> torch.Tensor:
    p = torch.softmax(logits, dim=-1)
    vals, idx = torch.topk(p, 32, dim=-1)
    vals = vals / vals.sum(-1, keepdim=True)
    return torch.gather(idx, -1, vals.argmax(-1, keepdim=True))


def moe_router(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    vals, idx = torch.topk(torch.softmax(x @ w, dim=-1), k=2, dim=-1)
    return vals, idx


def qk_norm(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return q / q.norm(dim=-1, keepdim=True), k / k.norm(dim=-1, keepdim=True)


def label_smoothed_ce_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    lp = F.log_softmax(logits, dim=-1)
    nll = -lp.gather(-1, targets[:, None]).squeeze(-1)
    smooth = -lp.mean(-1)
    return (0.9 * nll + 0.1 * smooth).mean()


def kl_divergence_loss(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    return F.kl_div(F.log_softmax(student / 2, dim=-1), F.softmax(teacher / 2, dim=-1), reduction="batchmean") * 4


def rope_tables(seq: int, head_dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin [seq, head_dim] in bf16, base 10000, emb = cat(freqs, freqs): built outside the timed call."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(BF16), emb.sin().to(BF16)


def _norm_input(p: Preset, d: torch.device) -> torch.Tensor:
    return _randn(p.batch, p.seq, p.hidden, device=d)


def _build_rmsnorm(p: Preset, d: torch.device) -> Built:
    return rmsnorm, (_norm_input(p, d), _randn(p.hidden, device=d)), {}


def _build_layernorm(p: Preset, d: torch.device) -> Built:
    return layernorm, (_norm_input(p, d), _randn(p.hidden, device=d), _randn(p.hidden, device=d)), {}


def _build_swiglu(p: Preset, d: torch.device) -> Built:
    x = _randn(p.tokens, p.hidden, device=d)
    wg, wu = _randn(p.hidden, p.mlp, device=d), _randn(p.hidden, p.mlp, device=d)
    return swiglu_mlp, (x, wg, wu, _randn(p.mlp, p.hidden, device=d)), {}


def _build_gelu(p: Preset, d: torch.device) -> Built:
    x = _randn(p.tokens, p.hidden, device=d)
    return gelu_mlp, (x, _randn(p.hidden, p.mlp, device=d), _randn(p.mlp, p.hidden, device=d)), {}


def _build_rope(p: Preset, d: torch.device) -> Built:
    x = _randn(p.batch, p.seq, p.heads, p.head_dim, device=d)
    cos, sin = rope_tables(p.seq, p.head_dim, d)
    return rope_apply, (x, cos, sin), {}


def _build_logits(p: Preset, d: torch.device) -> Built:
    return logits_projection_softmax, (_randn(p.tokens, p.hidden, device=d), _randn(p.hidden, p.vocab, device=d)), {}


def _build_topk(p: Preset, d: torch.device) -> Built:
    return topk_sampling_prep, (_randn(p.tokens, p.vocab, device=d),), {}


def _build_moe(p: Preset, d: torch.device) -> Built:
    return moe_router, (_randn(p.tokens, p.hidden, device=d), _randn(p.hidden, 64, device=d)), {}


def _build_qk(p: Preset, d: torch.device) -> Built:
    shape = (p.batch, p.heads, p.seq, p.head_dim)
    return qk_norm, (_randn(*shape, device=d), _randn(*shape, device=d)), {}


def _build_ce(p: Preset, d: torch.device) -> Built:
    logits = _randn(p.tokens, p.vocab, device=d)
    targets = torch.randint(0, p.vocab, (p.tokens,), device=d, dtype=torch.int64)
    return label_smoothed_ce_loss, (logits, targets), {}


def _build_kl(p: Preset, d: torch.device) -> Built:
    return kl_divergence_loss, (_randn(p.tokens, p.vocab, device=d), _randn(p.tokens, p.vocab, device=d)), {}


# FLOP counts: 2 per multiply-add of a matmul; a handful per element for the element-wise parts
# (the figure only feeds % of peak, where matmuls dominate or the kernel is bandwidth-bound anyway).
def _mm(m: int, k: int, n: int) -> float:
    return 2.0 * m * k * n


WORKLOADS = (
    Workload("llm_rmsnorm", "llm", ("norm", "memory-bound"), _build_rmsnorm,
             lambda p: 4.0 * p.tokens * p.hidden),
    Workload("llm_layernorm", "llm", ("norm", "memory-bound"), _build_layernorm,
             lambda p: 7.0 * p.tokens * p.hidden),
    Workload("llm_swiglu_mlp", "llm", ("gemm",), _build_swiglu,
             lambda p: 3 * _mm(p.tokens, p.hidden, p.mlp) + 5.0 * p.tokens * p.mlp),
    Workload("llm_gelu_mlp", "llm", ("gemm",), _build_gelu,
             lambda p: 2 * _mm(p.tokens, p.hidden, p.mlp) + 8.0 * p.tokens * p.mlp),
    Workload("llm_rope_apply", "llm", ("elementwise", "memory-bound"), _build_rope,
             lambda p: 3.0 * p.tokens * p.heads * p.head_dim),
    Workload("llm_logits_projection_softmax", "llm", ("gemm", "reduction"), _build_logits,
             lambda p: _mm(p.tokens, p.hidden, p.vocab) + 4.0 * p.tokens * p.vocab),
    Workload("llm_topk_sampling_prep", "llm", ("reduction", "sampling"), _build_topk,
             lambda p: 4.0 * p.tokens * p.vocab),
    Workload("llm_moe_router", "llm", ("gemm", "reduction"), _build_moe,
             lambda p: _mm(p.tokens, p.hidden, 64) + 4.0 * p.tokens * 64),
    Workload("llm_qk_norm", "llm", ("norm", "memory-bound"), _build_qk,
             lambda p: 2 * 4.0 * p.tokens * p.heads * p.head_dim),
    Workload("llm_label_smoothed_ce_loss", "llm", ("loss", "reduction"), _build_ce,
             lambda p: 6.0 * p.tokens * p.vocab),
    Workload("llm_kl_divergence_loss", "llm", ("loss", "reduction"), _build_kl,
             lambda p: 12.0 * p.tokens * p.vocab),
)
