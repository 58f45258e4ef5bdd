"""Shape presets: the study's prefill and decode shapes, and a tiny preset that keeps a CPU run fast."""

from __future__ import annotations

from dataclasses import dataclass

from workloads.errors import UnknownName


@dataclass(frozen=True)
class Preset:
    """Every dimension a workload may read; the values of docs/workloads.md's 'Common rules'."""

    name: str
    batch: int  # b
    seq: int  # s
    hidden: int  # h
    heads: int
    head_dim: int
    mlp: int  # LLM MLP intermediate size
    vocab: int
    vlm_batch: int
    vlm_image: int  # square image side, pixels
    vlm_patch: int  # conv stride and kernel
    vlm_tokens: int  # tokens seen by the ViT blocks
    vlm_embed: int
    contrastive_pairs: int
    unet_map: int  # U-Net feature map side
    unet_channels: int
    latent_map: int  # latent side (4 channels)
    diff_batch: int
    vae_map: int  # VAE decoder input side (same in prefill and decode)
    vae_channels: int
    vae_out_channels: int
    time_dim: int  # sinusoidal embedding width (half sin, half cos)
    time_hidden: int
    rl_pairs: int  # DPO/GRPO sample count (GRPO groups of 8)
    needs_cuda: bool  # the full-size presets allocate multi-GiB tensors: GPU only

    @property
    def tokens(self) -> int:
        """T = b * s, the row count of the LLM token-major tensors."""
        return self.batch * self.seq


PREFILL = Preset(
    name="prefill", batch=16, seq=2048, hidden=2048, heads=16, head_dim=128, mlp=5504, vocab=32768,
    vlm_batch=8, vlm_image=448, vlm_patch=14, vlm_tokens=1024, vlm_embed=1024, contrastive_pairs=256,
    unet_map=64, unet_channels=320, latent_map=128, diff_batch=8, vae_map=64, vae_channels=256,
    vae_out_channels=128, time_dim=320, time_hidden=1280, rl_pairs=512, needs_cuda=True,
)

DECODE = Preset(
    name="decode", batch=64, seq=1, hidden=2048, heads=16, head_dim=128, mlp=5504, vocab=32768,
    vlm_batch=8, vlm_image=224, vlm_patch=14, vlm_tokens=196, vlm_embed=1024, contrastive_pairs=256,
    unet_map=32, unet_channels=320, latent_map=64, diff_batch=8, vae_map=64, vae_channels=256,
    vae_out_channels=128, time_dim=320, time_hidden=1280, rl_pairs=512, needs_cuda=True,
)

# Same computations with shapes a 2-core CPU compiles and runs in seconds. Divisibility the computations
# need is kept: group_norm's 32 groups, GRPO's groups of 8, the patch stride.
TINY = Preset(
    name="tiny", batch=2, seq=16, hidden=64, heads=2, head_dim=32, mlp=128, vocab=256,
    vlm_batch=2, vlm_image=56, vlm_patch=14, vlm_tokens=16, vlm_embed=64, contrastive_pairs=16,
    unet_map=8, unet_channels=32, latent_map=16, diff_batch=2, vae_map=8, vae_channels=32,
    vae_out_channels=16, time_dim=32, time_hidden=64, rl_pairs=64, needs_cuda=False,
)

PRESETS: dict[str, Preset] = {p.name: p for p in (PREFILL, DECODE, TINY)}  # keys: names.PRESET_NAMES


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownName(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}") from None
