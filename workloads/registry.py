"""The one explicit registry of the 23 workloads, in the study's table order."""

from __future__ import annotations

from workloads import diffusion, llm, rl, vlm
from workloads.presets import PRESETS
from workloads.spec import Workload

# WORKLOADS.md order: llm, vlm, diffusion, then the two LLM losses and the RL losses.
_ORDER = (
    "llm_rmsnorm", "llm_layernorm", "llm_swiglu_mlp", "llm_gelu_mlp", "llm_rope_apply",
    "llm_logits_projection_softmax", "llm_topk_sampling_prep", "llm_moe_router", "llm_qk_norm",
    "vlm_patch_embedding_conv2d", "vlm_vit_mlp_block", "vlm_vision_rmsnorm_pool", "vlm_contrastive_nce_loss",
    "diff_unet_resblock", "diff_vae_decoder_upsample", "diff_time_embedding_mlp", "diff_cfg_blend",
    "diff_scheduler_step", "llm_label_smoothed_ce_loss", "llm_kl_divergence_loss", "rl_ppo_clipped_loss",
    "rl_dpo_loss", "rl_grpo_loss",
)

_BY_NAME: dict[str, Workload] = {w.name: w for m in (llm, vlm, diffusion, rl) for w in m.WORKLOADS}
if set(_BY_NAME) != set(_ORDER) or len(_ORDER) != 23:
    raise ImportError(f"workload registry out of sync: {sorted(set(_BY_NAME) ^ set(_ORDER))}")

WORKLOADS: tuple[Workload, ...] = tuple(_BY_NAME[n] for n in _ORDER)
NAMES: tuple[str, ...] = _ORDER

# Eager first: it is the reference every speedup is taken against.
MODES: tuple[str, ...] = ("eager", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def get(name: str) -> Workload:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown workload {name!r}; see `compile-baselines list` for the 23 names") from None


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise KeyError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    return mode


def instances(preset: str) -> list[Workload]:
    """The workloads the study measures in `preset`: 23 in prefill (and tiny), 18 in decode."""
    if preset not in PRESETS:
        raise KeyError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    return [w for w in WORKLOADS if w.applies_to(preset)]
